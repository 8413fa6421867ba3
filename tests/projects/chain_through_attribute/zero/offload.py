"""A ZeRO-3 style offloader: one-line hooks, the fetch two calls down."""
import torch

from .coordinator import Coordinator


class ParamOffloader:
    def __init__(self, module):
        self.module = module
        self.coordinator = Coordinator(torch.device("cuda"))

    def install(self, module):
        def _pre_forward_module_hook(module, *args):
            self.pre_sub_module_forward(module)

        def _post_forward_module_hook(module, inputs, output):
            self.post_sub_module_forward(module)

        module.register_forward_pre_hook(_pre_forward_module_hook)
        module.register_forward_hook(_post_forward_module_hook)

    def pre_sub_module_forward(self, sub_module):
        self.coordinator.trace(sub_module)
        self.coordinator.gather(sub_module)

    def post_sub_module_forward(self, sub_module):
        self.coordinator.drop(sub_module)
