//! The tests' fault-injecting proxy as a program, for `benches/remote/compare.py`: forwards a
//! loopback port to a loopback server, adding latency to every answer.
//!
//! ```text
//! cargo run --example fault_proxy -- http://127.0.0.1:8080 10
//! ```
//!
//! Prints the proxy's URL on the first line of stdout and serves until stdin closes.

#[path = "../tests/proxy/mod.rs"]
mod proxy;

use std::io::{BufRead, Write};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(upstream), Some(ms)) = (args.first(), args.get(1).and_then(|m| m.parse::<u64>().ok())) else {
        eprintln!("usage: fault_proxy UPSTREAM_URL LATENCY_MS");
        std::process::exit(2);
    };
    let faults = proxy::Faults { latency: Duration::from_millis(ms), ..proxy::Faults::default() };
    let p = proxy::Proxy::start(upstream, faults);
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", p.url());
    let _ = out.flush();
    // Serve until the driver closes stdin (or goes away).
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    let requests = p.counts().requests.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("fault_proxy: {requests} requests forwarded");
}
