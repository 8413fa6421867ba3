"""Outside the package: its one `spill_async` is no method of the package's
objects."""


class Spiller:
    def spill_async(self):
        self.weight = self.weight.cpu()
