//! Throughput of parsing, printing, comparing and adding quantities: the
//! operations the catalog's filters and the aggregator run per request.
//!
//! Run with `cargo bench -p quantity --bench parse_print`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::hint::black_box;
use std::time::{Duration, Instant};

use quantity::Quantity;

const INPUTS: &[&str] = &[
    "1500m",
    "4Gi",
    "1024Mi",
    "0.5",
    "100",
    "2G",
    "1e3",
    "1.5Gi",
    "250m",
    "110",
    "9223372036854775807",
    "0.0000000001",
];

/// Runs `f` over every input until at least a second has passed; returns ns/op.
fn measure(mut f: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed() < Duration::from_secs(1) {
        for i in 0..INPUTS.len() {
            f(i);
        }
        ops += INPUTS.len() as u64;
    }
    start.elapsed().as_nanos() as f64 / ops as f64
}

fn main() {
    let parsed: Vec<Quantity> = INPUTS.iter().map(|s| s.parse().unwrap()).collect();

    let parse = measure(|i| {
        black_box(black_box(INPUTS[i]).parse::<Quantity>().ok());
    });
    let print = measure(|i| {
        black_box(black_box(&parsed[i]).to_string());
    });
    let canonical = measure(|i| {
        black_box(black_box(&parsed[i]).canonical());
    });
    let compare = measure(|i| {
        let j = (i + 1) % parsed.len();
        black_box(black_box(&parsed[i]).cmp(black_box(&parsed[j])));
    });
    let add = measure(|i| {
        let j = (i + 1) % parsed.len();
        black_box(black_box(&parsed[i]).add(black_box(&parsed[j])));
    });

    println!("parse    {parse:8.1} ns/op");
    println!("print    {print:8.1} ns/op");
    println!("canonical{canonical:8.1} ns/op");
    println!("compare  {compare:8.1} ns/op");
    println!("add      {add:8.1} ns/op");
}
