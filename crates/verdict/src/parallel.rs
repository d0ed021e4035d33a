//! The one way `aggregate` spreads work over the cores: a scoped pool that maps a slice
//! in input order, so what it produces never depends on scheduling.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `f` applied to every item on up to one thread per core; results in input order.
pub fn map_in_order<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    // A panicking worker propagates out of the scope above, so every slot is filled.
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every item mapped")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_input_order() {
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(
            super::map_in_order(&v, |x| x * 2),
            (0..1000).map(|x| x * 2).collect::<Vec<_>>()
        );
        assert!(super::map_in_order(&[] as &[u8], |x| *x).is_empty());
    }
}
