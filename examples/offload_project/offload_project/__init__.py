"""Tiny layer-wise CPU offloading example used to exercise hookfence."""
from .hooks import CpuOffloadHook, PrefetchHook, add_hook
from .model import TinyModel, enable_offload

__all__ = ["CpuOffloadHook", "PrefetchHook", "TinyModel", "add_hook", "enable_offload"]
