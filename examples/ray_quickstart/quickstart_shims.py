"""Stand-ins for the torchvision pieces Ray's quick start imports, for nodes without
torchvision or network access: FashionMNIST reads Debian's copy (IDX files under
/usr/share/datasets/fashion-mnist, package fashion-mnist) instead of downloading; ToTensor,
Normalize and Compose work on the uint8 tensors it yields; resnet18 is a small network with the
same conv1 / num_classes interface, so that the quick start trains in seconds on CPUs.
FASHION_MNIST_LIMIT (default 4096) caps the samples read; 0 reads them all."""

import gzip
import os
import struct

import torch
from torch.utils.data import Dataset

DATA_DIR = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def _idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    t = torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8)
    return t.reshape(*dims)


class FashionMNIST(Dataset):
    """torchvision.datasets.FashionMNIST's interface over the local IDX files (root and
    download are accepted and ignored)."""

    def __init__(self, root=None, train=True, download=False, transform=None,
                 target_transform=None):
        prefix = "train" if train else "t10k"
        limit = int(os.environ.get("FASHION_MNIST_LIMIT", "4096"))
        images = _idx(os.path.join(DATA_DIR, f"{prefix}-images-idx3-ubyte.gz"))
        labels = _idx(os.path.join(DATA_DIR, f"{prefix}-labels-idx1-ubyte.gz"))
        if limit > 0:
            images, labels = images[:limit], labels[:limit]
        self.data, self.targets = images, labels.long()
        self.transform, self.target_transform = transform, target_transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        img, target = self.data[i], int(self.targets[i])
        if self.transform:
            img = self.transform(img)
        if self.target_transform:
            target = self.target_transform(target)
        return img, target


class ToTensor:
    """uint8 HxW -> float 1xHxW in [0, 1]."""

    def __call__(self, img):
        return img.unsqueeze(0).float().div(255.0)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = torch.tensor(mean).view(-1, 1, 1), torch.tensor(std).view(-1, 1, 1)

    def __call__(self, t):
        return (t - self.mean) / self.std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class _SmallNet(torch.nn.Module):
    """conv1 (replaced by the quick start with a 1->64 channel 7x7 conv), then pooling and one
    linear layer."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.pool = torch.nn.AdaptiveAvgPool2d(4)
        self.fc = torch.nn.Linear(64 * 16, num_classes)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def resnet18(num_classes=1000):
    """A small stand-in for torchvision.models.resnet18 (same conv1 and num_classes)."""
    return _SmallNet(num_classes)
