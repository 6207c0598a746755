//! File locks (issue 4): owned by the file-locks work.
