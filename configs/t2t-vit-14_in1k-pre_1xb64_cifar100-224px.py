# T2T-ViT-14 transferred from ImageNet-1k to CIFAR-100 (fine labels): the
# CIFAR-10 transfer recipe, including its CIFAR normalisation, on the 100
# classes.
_base_ = './t2t-vit-14_in1k-pre_1xb64_cifar10-224px.py'

dataset_type = 'LocalCIFAR100'
data_root = 'data/cifar100'

model = dict(head=dict(num_classes=100))
data_preprocessor = dict(num_classes=100)

train_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
