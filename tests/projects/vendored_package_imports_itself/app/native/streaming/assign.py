from torch import nn


def put_into_module(root, dotted_name, tensor):
    parts = dotted_name.split(".")
    parent = root
    for part in parts[:-1]:
        parent = getattr(parent, part)
    if parts[-1] in parent._parameters:
        parent._parameters[parts[-1]] = nn.Parameter(tensor, requires_grad=False)


def count_call(counter):
    counter["calls"] = counter.get("calls", 0) + 1
