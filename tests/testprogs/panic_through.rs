// Calls handle(i) <count> times after the go line, each inside
// catch_unwind; every third call panics two frames down, in step(), and
// the panic unwinds it back to main (a server's per-request guard does so).
// Built by the test with whichever rustc is installed. Prints "ready
// <pid>", then "done <returned> <panicked>", then waits for stdin to close.
use std::io::BufRead;
use std::panic;

static SINK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[inline(never)]
fn step(i: u64) -> u64 {
    if i % 3 == 0 {
        panic!("request {} failed", i);
    }
    SINK.fetch_add(i, std::sync::atomic::Ordering::Relaxed) + 1
}

// no_mangle: probed by this name; inline(never): a frame of its own.
#[no_mangle]
#[inline(never)]
pub fn handle(i: u64) -> u64 {
    let scratch = format!("request {}", i);
    step(i) + scratch.len() as u64
}

fn main() {
    let count: u64 = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(3000);
    panic::set_hook(Box::new(|_| {})); // each panic is expected: no message
    println!("ready {}", std::process::id());
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    lines.next();
    let (mut returned, mut panicked) = (0u64, 0u64);
    for i in 0..count {
        match panic::catch_unwind(|| handle(i)) {
            Ok(_) => returned += 1,
            Err(_) => panicked += 1,
        }
    }
    println!("done {} {}", returned, panicked);
    for _ in lines {}
}
