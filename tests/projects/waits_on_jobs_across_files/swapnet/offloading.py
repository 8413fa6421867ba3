# The jobs a worker thread runs: each swaps the weights of two blocks
# between the host and the device. The futures are kept on the object.
from concurrent.futures import ThreadPoolExecutor


def _swap(to_host, to_device, device):
    for a, b in zip(to_host.parameters(), to_device.parameters()):
        a.data = a.data.to("cpu", non_blocking=True)
        b.data = b.data.to(device, non_blocking=True)


class Offloader:
    def __init__(self, blocks, device):
        self.blocks = blocks
        self.device = device
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.futures = {}
        self.notes = {}

    def _submit(self, out_idx, in_idx):
        def move(to_host, to_device):
            _swap(to_host, to_device, self.device)
            return in_idx

        self.futures[in_idx] = self.pool.submit(move, self.blocks[out_idx], self.blocks[in_idx])

    def _note(self, idx):
        self.notes[idx] = self.pool.submit(print, "block", idx)

    def _wait(self, idx):
        future = self.futures.pop(idx, None)
        if future is not None:
            future.result()

    def _wait_note(self, idx):
        self.notes.pop(idx).result()
