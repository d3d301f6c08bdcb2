# The small-image recipe of configs/t2t-vit-lite_1xb64_custom-32px.py,
# taught by a ResNet-18 trained on the same folders (knowledge
# distillation: the student also learns the teacher's class
# probabilities). Train the teacher
# first, with the same pipeline, data preprocessor and schedule:
#
#   python tools/train.py \
#       .dev_scripts/small_data/resnet-18_1xb64_custom-32px.py
#
# which writes work_dirs/resnet-18_1xb64_custom-32px/epoch_12.pth; then
# train the student with this config (TEACHER_CHECKPOINT=PATH before the
# command for another teacher). The student's checkpoints hold no teacher:
# they load into the recipe's config for testing and deployment.
_base_ = ['../../../configs/t2t-vit-lite_1xb64_custom-32px.py']

# run from the repository root, with it on the path (PYTHONPATH=.)
custom_imports = dict(
    imports=['t2t_plugin', 'projects.small_data.levers'],
    allow_failed_imports=False,
)

teacher_checkpoint = '{{$TEACHER_CHECKPOINT:work_dirs/resnet-18_1xb64_custom-32px/epoch_12.pth}}'  # noqa: E501
# the number of class folders (NUM_CLASSES=... before the command); the
# teacher's as well
num_classes = {{'$NUM_CLASSES:3'}}

model = dict(
    type='DistillationClassifier',
    # the ResNet-18 of .dev_scripts/small_data/resnet-18_1xb64_custom-32px.py
    teacher=dict(
        type='ImageClassifier',
        backbone=dict(type='ResNet', depth=18),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(
            type='LinearClsHead', num_classes=num_classes, in_channels=512
        ),
    ),
    teacher_checkpoint=teacher_checkpoint,
    # loss = 0.5 * the head's loss + 0.5 * T^2 KL(teacher || student) at T=4
    kd_mode='soft',
    kd_weight=0.5,
    temperature=4.0,
    head=dict(num_classes=num_classes),
)
data_preprocessor = dict(num_classes=num_classes)
