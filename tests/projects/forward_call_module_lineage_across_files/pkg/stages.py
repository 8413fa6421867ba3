# The stage's forward runs around the model, eagerly: the VAE it moves needs
# no fence. The model's forward is traced: its release step is listed.
from .base import OffloadableModel, PipelineStage


class DecodeStage(PipelineStage):
    def __init__(self, vae):
        self.vae = vae

    def load(self):
        self.vae = self.vae.cuda()

    def forward(self, batch):
        self.load()
        return self.vae.decode(batch)


class Denoiser(OffloadableModel):
    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def release(self):
        self.unet.cpu()

    def forward(self, x):
        y = self.unet(x)
        self.release()
        return y
