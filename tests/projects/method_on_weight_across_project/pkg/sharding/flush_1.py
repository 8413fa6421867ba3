# One of four classes that define the same method: too many to tell.
class Flusher1:
    def __init__(self, param):
        self.param = param

    def flush_everything(self):
        self.param.data = self.param.data.to("cpu")
