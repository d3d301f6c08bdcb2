# CIFAR-100 (fine labels) upsampled to 224x224 for transfer learning; the
# pipelines of the CIFAR-10 file.
_base_ = ['./cifar10_bs64_t2t_224.py']

dataset_type = 'LocalCIFAR100'
data_root = 'data/cifar100'
data_preprocessor = dict(num_classes=100)

train_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
