use memo_runtime::memoized;

mod office {
    #[derive(serde::Serialize)]
    pub struct Memo {
        pub text: String,
    }
}

#[memoized]
async fn file_note(note: &office::Memo, copies: u8) -> memo_runtime::Result<String> {
    Ok(note.text.repeat(copies.into()))
}

fn main() {}
