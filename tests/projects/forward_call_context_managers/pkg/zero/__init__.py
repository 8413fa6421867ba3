# The gather context manager is re-exported by the package.
from .gather import GatheredParameters
