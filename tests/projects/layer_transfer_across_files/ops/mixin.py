class AutocastMixin:
    def enable_autocast(self, on=True):
        self._autocast = on
