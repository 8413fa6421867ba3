def move_it(module):
    module.to("cuda")


def move_params(module):
    for p in module.parameters():
        p.data = p.data.to("cuda")
