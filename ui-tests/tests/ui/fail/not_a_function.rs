use memo_runtime::memoized;

#[memoized]
struct Draft;

fn main() {}
