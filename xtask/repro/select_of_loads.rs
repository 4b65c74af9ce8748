//! A stand-alone reproducer of the miscompilation that crashed `handoff run` (docs/miscompilation.md).
//!
//! Safe Rust only. Built with rustc 1.95.0 (LLVM 22.1.2) and the nightly of 2026-05-19 (LLVM
//! 22.1.4), x86_64, `rustc -O select_of_loads.rs`, it dies of SIGSEGV (exit 139); at `-C
//! opt-level=0` or `1` it prints 1. `cargo xtask miscompile-repro` builds and runs it.
//!
//! What happens: `check` is compiled without a branch on `stored`. The discriminant of
//! `lsn_commit` is loaded whether or not `stored` is `Some`, truncated with `trunc nuw` (valid
//! only for 0 or 1) and the two loads `lsn_commit`/`lsn_proc` are folded by the x86 instruction
//! selector into one load at `base + 8 + 16 * discriminant` (llvm/llvm-project#208611, fixed
//! by llvm/llvm-project#208683, which freezes the condition; reported to Rust as
//! rust-lang/rust#159035). `Slot::Stored(None)` writes only the niche that says `None`, so the
//! bytes where `lsn_commit`'s discriminant would be keep the junk written before, and the load
//! goes to a wild address.
use std::hint::black_box;

#[derive(Clone, Copy)]
pub struct Offset {
    pub lsn_proc: Option<u64>,
    pub lsn_commit: Option<u64>,
}

#[inline(never)]
pub fn check(stored: &Option<Offset>, to: u64, found: &mut Vec<String>) {
    let durable = stored.and_then(|offset| offset.lsn_commit.or(offset.lsn_proc));
    if durable.is_none_or(|durable| to > durable) {
        let mut text = String::from("confirmed past ");
        text.push_str(&match durable {
            Some(durable) => format!("{durable}"),
            None => "nothing".into(),
        });
        found.push(text);
    }
}

pub enum Slot {
    Junk([u64; 4]),
    Stored(Option<Offset>),
}

fn main() {
    let mut slot = Slot::Junk([0x4141_4141_4141_4141; 4]);
    black_box(&mut slot);
    slot = Slot::Stored(None);
    black_box(&mut slot);
    let mut found = Vec::new();
    if let Slot::Stored(stored) = &slot {
        check(black_box(stored), 7, &mut found);
    }
    println!("{}", found.len());
}
