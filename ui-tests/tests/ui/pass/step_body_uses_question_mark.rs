//! A step body that uses `?` on errors of other types and ends with a plain
//! `Ok(value)`: `step_boxed` and `step_with_boxed` fix the body's error to
//! `BoxError`, so nothing is left to annotate (with `step`, the body's
//! error type cannot be inferred).
use memo_runtime::workflow::{BoxError, Context, Workflow};

struct Order {
    cents: u64,
}

fn main() {
    let _checkout = Workflow::new("checkout", |ctx: Context, json: String| async move {
        let cents = ctx
            .step_boxed("parse", |_memo| {
                let json = json.clone();
                async move {
                    let order: Order = serde_json_like(&json)?;
                    Ok(order.cents)
                }
            })
            .await?;
        let euros = ctx
            .step_with_boxed("format", cents, |_memo, cents| async move {
                let whole: u32 = (cents / 100).try_into()?;
                Ok(format!("{whole} EUR"))
            })
            .await?;
        Ok::<_, BoxError>(euros)
    });
}

/// Stands for a parser with an error type of its own.
fn serde_json_like(text: &str) -> Result<Order, std::num::ParseIntError> {
    Ok(Order {
        cents: text.trim().parse()?,
    })
}
