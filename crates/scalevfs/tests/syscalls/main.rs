//! Every system call and errno path, compared call by call with the host kernel on tmpfs
//! (/dev/shm). Permission cases run with the host thread's fsuid switched to 1000.

#[path = "../common/mod.rs"]
mod common;
use common::Both;
use libc::*;
use scalevfs::Timespec;

const RW: i32 = O_RDWR;

mod files;
mod limits;
mod names;
mod perms;
mod process;

fn idx(r: common::R) -> usize {
    match r.unwrap() {
        common::Out::Int(i) => i as usize,
        o => panic!("not an index: {o:?}"),
    }
}
