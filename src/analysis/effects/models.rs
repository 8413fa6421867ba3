//! Models of library code the project calls but does not contain: what a
//! torch, `torch.distributed` or accelerate function (or a tensor's or a
//! module's method) does to which argument, the way Pysa keeps models of
//! code it cannot read. A call counts as weight work only through one of
//! these models or through a project function's summary, never by a word
//! in its name.
//!
//! Functions are keyed by the dotted path an import resolves the callee to
//! (`dist.all_gather_into_tensor` with `import torch.distributed as dist`
//! is `torch.distributed.all_gather_into_tensor`); methods by their name,
//! on any receiver the project does not define them for.

/// What a modelled library function does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionModel {
    /// A collective: the tensors among its arguments are gathered, broadcast
    /// or scattered across ranks (`all_gather_into_tensor(full, shard)`).
    Collective,
    /// Moves a tensor of the module in its first argument, by name, to a
    /// device, storing it back (`set_module_tensor_to_device`).
    SetModuleTensor,
    /// Returns its first argument moved to a device, a copy
    /// (`send_to_device`).
    SendToDevice,
    /// Waits for the device (`torch.cuda.synchronize()`).
    Synchronize,
    /// Changes the RNG state (`torch.manual_seed`).
    Rng,
    /// Makes a new tensor (`torch.empty`, `torch.zeros_like`).
    Factory,
    /// Wraps a tensor as a parameter, the same storage
    /// (`torch.nn.Parameter(t)`).
    Parameter,
    /// Exchanges the contents of its two tensors, storage included
    /// (`torch.utils.swap_tensors(p, new)`).
    SwapTensors,
}

/// The collectives of `torch.distributed` that move tensors between ranks.
/// `all_reduce` is left out: on module state it reduces gradients or
/// statistics in place, which dynamo traces as a collective on values.
const COLLECTIVES: &[&str] = &[
    "all_gather",
    "all_gather_into_tensor",
    "_all_gather_base",
    "all_gather_coalesced",
    "broadcast",
    "broadcast_coalesced",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "_reduce_scatter_base",
    "scatter",
];

const FACTORIES: &[&str] = &[
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "randperm",
    "tensor",
    "as_tensor",
    "from_numpy",
    "cat",
    "stack",
    "where",
];

/// Methods of torch's `Tensor` that reshape, view, repeat or describe it,
/// which `nn.Module` does not have: what they are called on is a tensor,
/// not a submodule (`self.up.flatten(start_dim=1)`), and what they return
/// is made from it (a view, a copy, a size).
pub const TENSOR_ONLY_METHODS: &[&str] = &[
    "contiguous",
    "dim",
    "expand",
    "expand_as",
    "flatten",
    "mm",
    "numel",
    "permute",
    "repeat",
    "reshape",
    "reshape_as",
    "size",
    "squeeze",
    "t",
    "transpose",
    "unsqueeze",
    "view",
    "view_as",
];

/// Factories that allocate storage without values: `.data = torch.empty(0)`
/// frees a parameter's storage, `.data = torch.empty(shape, device=d)`
/// allocates it.
pub const STORAGE_FACTORIES: &[&str] = &["empty", "empty_like", "empty_strided"];

/// The model of the library function at `path` (absolute dotted path).
pub fn function_model(path: &str) -> Option<FunctionModel> {
    let (module, name) = path.rsplit_once('.')?;
    match module {
        "torch.distributed" | "torch.distributed.distributed_c10d" | "torch.distributed.c10d"
            if COLLECTIVES.contains(&name) =>
        {
            Some(FunctionModel::Collective)
        }
        "accelerate.utils" | "accelerate.utils.modeling" | "accelerate.hooks"
            if name == "set_module_tensor_to_device" =>
        {
            Some(FunctionModel::SetModuleTensor)
        }
        "accelerate.utils" | "accelerate.utils.operations" | "accelerate.hooks"
            if name == "send_to_device" =>
        {
            Some(FunctionModel::SendToDevice)
        }
        "torch.cuda" | "torch.xpu" | "torch.mps" | "torch.npu" | "torch.accelerator"
            if name == "synchronize" =>
        {
            Some(FunctionModel::Synchronize)
        }
        "torch" | "torch.random" | "torch.cuda" | "torch.cuda.random"
            if matches!(
                name,
                "manual_seed"
                    | "manual_seed_all"
                    | "set_rng_state"
                    | "set_rng_state_all"
                    | "fork_rng"
                    | "seed"
                    | "seed_all"
            ) =>
        {
            Some(FunctionModel::Rng)
        }
        "torch" if FACTORIES.contains(&name) => Some(FunctionModel::Factory),
        "torch.utils" | "torch.utils._python_dispatch" if name == "swap_tensors" => {
            Some(FunctionModel::SwapTensors)
        }
        "torch.nn" | "torch.nn.parameter" | "torch.nn.Parameter" if name == "Parameter" => {
            Some(FunctionModel::Parameter)
        }
        _ => None,
    }
}

/// What a modelled method does to its receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodModel {
    /// Returns a moved or cast copy of a tensor; moves a module in place
    /// (`to`, `cuda`, `cpu`, `half`, ...).
    Move,
    /// Returns a copy in pinned memory (`pin_memory`).
    Pin,
    /// Iterates module state: parameters, buffers, state-dict tensors.
    StateItems,
    /// Iterates submodules.
    Submodules,
    /// Copies another tensor into the receiver (`copy_`).
    CopyInto,
    /// Points the receiver at other storage (`set_`).
    SetStorage,
    /// The receiver's storage (`untyped_storage()`), whose `resize_` frees
    /// or allocates it.
    Storage,
    /// Resizes a storage (`resize_` of `untyped_storage()`).
    Resize,
    /// Keeps the receiver alive on a stream (`record_stream`).
    RecordStream,
    /// Waits for a stream or an event (`wait_stream`, `wait_event`).
    StreamWait,
    /// Waits for the device or a stream (`synchronize`).
    Synchronize,
    /// Waits for an asynchronous collective's handle or a future (`wait`).
    Wait,
    /// Waits for the job a `concurrent.futures` future stands for
    /// (`future.result()` of `executor.submit(job, ...)`): work on module
    /// state only where that job's is.
    FutureResult,
    /// torch FSDP2's `FSDPModule.unshard()` / `reshard()`: all-gathers or
    /// frees the module's sharded parameters.
    Shard,
    /// Changes an RNG's state (`manual_seed` of a generator).
    Rng,
    /// Items of a container as they are (`values()`, `items()`, `detach()`).
    Same,
    /// Copies a state dict's tensors into a module's parameters and
    /// buffers, or makes them the module's (`load_state_dict(sd)`).
    LoadState,
    /// Replaces every parameter and buffer of a module by what a function
    /// makes of it (`module._apply(fn)`, what `.to()` runs).
    ApplyToTensors,
}

/// The model of the method `name` called with `positional` positional
/// arguments, on a receiver the project does not define it for.
pub fn method_model(name: &str, positional: usize) -> Option<MethodModel> {
    Some(match name {
        "to" | "cuda" | "cpu" | "half" | "float" | "double" | "bfloat16" | "type" | "to_empty"
        | "xpu" | "npu" => MethodModel::Move,
        "pin_memory" => MethodModel::Pin,
        "parameters" | "named_parameters" | "buffers" | "named_buffers" | "state_dict" => {
            MethodModel::StateItems
        }
        "modules" | "named_modules" | "children" | "named_children" => MethodModel::Submodules,
        "copy_" => MethodModel::CopyInto,
        "set_" => MethodModel::SetStorage,
        "untyped_storage" | "storage" | "_typed_storage" => MethodModel::Storage,
        "resize_" | "_resize_" => MethodModel::Resize,
        "record_stream" => MethodModel::RecordStream,
        "wait_stream" | "wait_event" => MethodModel::StreamWait,
        "synchronize" => MethodModel::Synchronize,
        "wait" if positional == 0 => MethodModel::Wait,
        "result" if positional == 0 => MethodModel::FutureResult,
        "unshard" | "reshard" if positional == 0 => MethodModel::Shard,
        "manual_seed" | "set_rng_state" | "set_state" | "fork_rng" => MethodModel::Rng,
        "load_state_dict" if positional >= 1 => MethodModel::LoadState,
        "_apply" if positional >= 1 => MethodModel::ApplyToTensors,
        "values" | "items" | "detach" | "view" | "contiguous" | "flatten" | "narrow" | "chunk"
        | "split" | "unbind" | "view_as" | "reshape" | "t" => MethodModel::Same,
        _ => return None,
    })
}

/// The attribute of a custom autograd Function's `ctx` that hands back
/// what its `forward` saved with `ctx.save_for_backward(...)`;
/// `saved_tensors[i]` stands for its `i`-th tensor.
pub(crate) const SAVED_TENSORS: &str = "saved_tensors";

/// Whether an attribute of `ctx` stands for what the forward saved.
pub(crate) fn is_saved_tensor(attr: &str) -> bool {
    attr.starts_with(SAVED_TENSORS)
}

/// Attributes of a module or tensor that hold module state.
pub fn state_attribute(name: &str) -> bool {
    matches!(
        name,
        "weight" | "bias" | "data" | "_parameters" | "_buffers"
    )
}

/// Attributes torch's `Tensor` defines that are tensors themselves (a
/// view, the storage, the gradient) or autograd's (`grad_fn`): any other
/// attribute read of a tensor is a Python object the code attached to it
/// (`p._shard`, `p.holder`).
pub fn tensor_attribute(name: &str) -> bool {
    matches!(
        name,
        "data" | "T" | "mT" | "H" | "mH" | "real" | "imag" | "grad" | "_base" | "grad_fn"
    )
}

/// Attributes that describe a tensor and are no tensor themselves.
pub fn meta_attribute(name: &str) -> bool {
    matches!(
        name,
        "device" | "dtype" | "shape" | "is_cuda" | "ndim" | "requires_grad" | "is_meta" | "layout"
    )
}

/// Builtins that hand back (items of) their first argument.
pub fn passes_through(name: &str) -> bool {
    matches!(
        name,
        "list"
            | "tuple"
            | "iter"
            | "next"
            | "reversed"
            | "sorted"
            | "enumerate"
            | "zip"
            | "dict"
            | "set"
            | "frozenset"
            | "filter"
            | "cast"
    )
}

/// Builtins whose result is plain data, not a tensor or a module.
pub fn makes_meta(name: &str) -> bool {
    matches!(
        name,
        "len"
            | "int"
            | "float"
            | "str"
            | "bool"
            | "isinstance"
            | "hasattr"
            | "id"
            | "hash"
            | "repr"
            | "format"
            | "print"
            | "type"
            | "range"
            | "min"
            | "max"
            | "sum"
            | "abs"
            | "round"
            | "callable"
            | "issubclass"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_function_model_is_keyed_by_its_library_path() {
        for (path, model) in [
            (
                "torch.distributed.all_gather_into_tensor",
                FunctionModel::Collective,
            ),
            (
                "torch.distributed._all_gather_base",
                FunctionModel::Collective,
            ),
            ("torch.distributed.broadcast", FunctionModel::Collective),
            (
                "torch.distributed.reduce_scatter_tensor",
                FunctionModel::Collective,
            ),
            (
                "accelerate.utils.set_module_tensor_to_device",
                FunctionModel::SetModuleTensor,
            ),
            (
                "accelerate.utils.modeling.set_module_tensor_to_device",
                FunctionModel::SetModuleTensor,
            ),
            (
                "accelerate.utils.send_to_device",
                FunctionModel::SendToDevice,
            ),
            ("torch.cuda.synchronize", FunctionModel::Synchronize),
            ("torch.manual_seed", FunctionModel::Rng),
            ("torch.cuda.set_rng_state", FunctionModel::Rng),
            ("torch.random.fork_rng", FunctionModel::Rng),
            ("torch.empty", FunctionModel::Factory),
            ("torch.nn.Parameter", FunctionModel::Parameter),
        ] {
            assert_eq!(function_model(path), Some(model), "{path}");
        }
        for path in [
            "torch.distributed.all_reduce",
            "torch.distributed.get_rank",
            "myproject.utils.send_to_device",
            "all_gather",
            "torch.cuda.empty_cache",
        ] {
            assert_eq!(function_model(path), None, "{path}");
        }
    }

    #[test]
    fn each_method_model_answers_its_name_and_arity() {
        assert_eq!(method_model("to", 1), Some(MethodModel::Move));
        assert_eq!(method_model("copy_", 1), Some(MethodModel::CopyInto));
        assert_eq!(method_model("wait", 0), Some(MethodModel::Wait));
        assert_eq!(method_model("wait", 1), None);
        assert_eq!(method_model("result", 0), Some(MethodModel::FutureResult));
        // `outcome.result(step)` is no future's wait.
        assert_eq!(method_model("result", 1), None);
        assert_eq!(method_model("unshard", 0), Some(MethodModel::Shard));
        // `Sharder.unshard(output, 1, mesh)` is no FSDP module's unshard().
        assert_eq!(method_model("unshard", 3), None);
        assert_eq!(
            method_model("record_stream", 1),
            Some(MethodModel::RecordStream)
        );
        assert_eq!(method_model("fetch_sub_module", 1), None);
        assert_eq!(method_model("onload_", 0), None);
        assert!(state_attribute("_parameters") && !state_attribute("weights"));
        assert!(meta_attribute("device") && !meta_attribute("data"));
    }
}
