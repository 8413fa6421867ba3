//! Values freed on a thread of their own: a run's facts and memos are large
//! and made of many small allocations, and freeing them takes the thread
//! that does it tens of milliseconds it can spend going on instead.

/// Drops `value` on a thread of its own. A process that ends first does not
/// wait for it; where no thread can be made, `value` is dropped here.
pub fn drop_aside<T: Send + 'static>(value: T) {
    let spawned = std::thread::Builder::new()
        .name("hookfence-drop".into())
        .spawn(move || drop(value));
    // On an error the closure, and the value with it, was dropped already.
    let _ = spawned;
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_dropped_aside_is_dropped() {
        struct Signals(std::sync::mpsc::Sender<()>);
        impl Drop for Signals {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let (sender, receiver) = std::sync::mpsc::channel();
        super::drop_aside(Signals(sender));
        receiver
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("dropped on its own thread");
    }
}
