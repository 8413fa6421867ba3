# A forward in a file without any sign of weight work, whose only other
# mention of "forward" is this comment's (and the one below): the file is
# neither parsed by the prefilter nor indexed without it, so its forward
# is no root in either mode (the helper it calls is not listed).
import torch
from helpers import move_it

# runs before the "forward" pass


class Block(torch.nn.Module):
    def forward(self, x):
        move_it(self)
        return x
