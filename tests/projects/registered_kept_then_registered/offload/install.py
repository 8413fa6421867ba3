import torch

from .factories import build, make_logger


class Installer:
    def __init__(self, model):
        self.model = model
        self._post = build("post")

    def install(self):
        hook = build("pre")
        for block in self.model.blocks:
            block.register_forward_pre_hook(hook)
            block.register_forward_hook(self._post)
        self.model.register_forward_hook(make_logger("out"))
