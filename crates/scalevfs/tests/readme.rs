//! The workspace README's first Rust example is `src/readme_example.md`'s, which the
//! doctests compile and run: this keeps the two the same.

fn first_rust_block(text: &str) -> Option<&str> {
    let start = text.find("```rust\n")?;
    let len = text[start + 8..].find("```")?;
    Some(&text[start..start + 8 + len])
}

#[test]
fn the_readme_shows_the_compiled_example() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let Ok(readme) = std::fs::read_to_string(format!("{dir}/../../README.md")) else {
        eprintln!("skipped: no workspace README (a packaged crate)");
        return;
    };
    let compiled = include_str!("../src/readme_example.md");
    let want = first_rust_block(compiled).expect("a rust block in readme_example.md");
    assert_eq!(
        first_rust_block(&readme),
        Some(want),
        "README.md's first ```rust block differs from crates/scalevfs/src/readme_example.md"
    );
}
