"""A weight store of the project's own, no nn.Module: what the steps below
call moves its weights. Each method runs only inside one step."""


class Store:
    def load(self, state):
        self.w = state["w"]

    def fetch(self):
        self.w = self.w.cuda(non_blocking=True)

    def refetch(self):
        self.w = self.w.to("cuda", non_blocking=True)

    def fetch_again(self):
        self.w = self.w.cuda()

    def fetch_shallow(self):
        self.w = self.w.cuda()
