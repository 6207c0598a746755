//! # scalevfs-tmpfs (issue 3): owned by the VFS-core work.
