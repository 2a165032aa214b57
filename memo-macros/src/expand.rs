//! Generates the memoized function: the original signature, and a body that
//! derives the key, asks the memo, and runs the original body only on a miss.

use proc_macro2::{Group, Ident, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::attr::{Options, Scope};
use crate::item::MemoFn;
use crate::valid::{self, KeyType, MemoSource, Plan};

/// The whole pipeline: parse the options, check them, generate.
///
/// The function is always emitted, even when a check fails, so one mistake
/// gives one error and code that calls the function keeps type-checking.
pub(crate) fn memoized(args: TokenStream, item: TokenStream) -> TokenStream {
    let func: MemoFn = match syn::parse2(item.clone()) {
        Ok(func) => func,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                "`#[memoized]` applies to an `async fn` with a body",
            );
            let error = error.into_compile_error();
            return quote!(#item #error);
        }
    };
    match plan(args, &func) {
        Ok(plan) => expand(&plan, &func),
        Err(error) => {
            let error = error.into_compile_error();
            let func = unexpanded(func);
            quote!(#func #error)
        }
    }
}

/// The function as written, for when it cannot be expanded: it still
/// exists for its callers, without warnings or errors that only follow from
/// the reported one.
fn unexpanded(mut func: MemoFn) -> MemoFn {
    // Parameters the expansion would have used (the memo, the key) would
    // otherwise be reported as unused.
    func.attrs
        .push(syn::parse_quote!(#[allow(unused_variables)]));
    // `const async fn` is an error of its own; ours already says `const` must go.
    func.sig.constness = None;
    func
}

fn plan(args: TokenStream, func: &MemoFn) -> syn::Result<Plan> {
    let mut attr = Options::parse_args(args)?;
    let mut errors = std::mem::take(&mut attr.errors).into_iter();
    if let Some(mut first) = errors.next() {
        // A misspelt option (say `memmo`) would also look like a missing
        // memo to the signature checks, so those wait until the options read
        // cleanly: one mistake, one error.
        errors.for_each(|e| first.combine(e));
        return Err(first);
    }
    valid::check(attr, &func.sig)
}

/// A local of the expansion: mixed-site hygiene, so neither the user's
/// parameters nor their body can name it, located at `at` for errors.
fn local(name: &str, at: Span) -> Ident {
    Ident::new(name, Span::mixed_site().located_at(at))
}

fn expand(plan: &Plan, func: &MemoFn) -> TokenStream {
    let MemoFn {
        attrs, vis, sig, ..
    } = func;
    let inner_attrs = func.inner_attrs_as_outer();
    let block = func.block();
    let Plan {
        krate,
        name,
        output,
        ..
    } = plan;
    let (bind_memo, memo) = memo_handle(plan);
    let (bind_memo, memo) = in_scope(plan, bind_memo, memo);
    let key_value = key_call(plan);
    // Only a declared cost adds to the expansion.
    let cost = plan
        .cost
        .as_ref()
        .map(|cost| quote_spanned!(cost.span()=> .with_cost(#cost)));
    // Every bound on the return type is checked in this one call, so its
    // errors land on the return type.
    let codec = {
        let private = private_path(krate, output.span());
        quote_spanned!(output.span()=> #private::codec::<#output>())
    };
    let fake_return = fake_return(output);
    let runtime = private_path(krate, Span::call_site());
    let at = Span::call_site();
    let (codec_local, call, value) = (
        local("__memo_codec", at),
        local("__memo_call", at),
        local("__memo_value", at),
    );
    let (body, output_local, cx, failed) = (
        local("__memo_body", at),
        local("__memo_output", at),
        local("__memo_cx", at),
        local("__memo_failed", at),
    );

    // The sequence `memo_runtime::memoize::engine::Codec` documents: only
    // these lines are compiled per function; the work is in the runtime.
    quote! {
        #(#attrs)*
        #(#inner_attrs)*
        #vis #sig {
            #bind_memo
            let #codec_local = #codec;
            let mut #call = #runtime::Call::new(#memo, #name, #key_value)#cost;
            let mut #value = ::core::option::Option::None;
            if #call.look_up().await {
                let mut #body = ::core::pin::pin!(async {
                    #fake_return
                    #block
                });
                let #output_local = ::core::future::poll_fn(|#cx| {
                    #codec_local.poll_body(&#call, #body.as_mut(), #cx)
                })
                .await;
                if let ::core::option::Option::Some(#failed) =
                    #codec_local.ran(&mut #call, #output_local, &mut #value)
                {
                    return #failed;
                }
                #call.commit().await;
            }
            #codec_local.finish(#call, #value)
        }
    }
}

/// The block deriving the key: name, version, the arguments (each checked
/// at its type) and the types.
fn key_call(plan: &Plan) -> TokenStream {
    let Plan {
        krate,
        name,
        version,
        key_args,
        key_types,
        ..
    } = plan;
    let key = local("__memo_call_key", Span::call_site());
    let args = key_args.iter().map(|arg| {
        let value = &arg.value;
        let private = private_path(krate, arg.span);
        let add = if arg.receiver {
            quote_spanned!(arg.span=> receiver)
        } else {
            quote_spanned!(arg.span=> arg)
        };
        quote_spanned!(arg.span=> #private::CallKey::#add(&mut #key, #value);)
    });
    let private = private_path(krate, Span::call_site());
    let types = key_types.iter().map(|ty| {
        let value = match ty {
            KeyType::SelfType => quote!(#private::type_key::<Self>()),
            KeyType::Param(param) => quote!(#private::type_key::<#param>()),
            KeyType::Const(param) => quote!(&#param),
            KeyType::OfArg(arg) => quote!(#private::type_key_of_val(&#arg)),
        };
        quote!(#private::CallKey::type_part(&mut #key, #value);)
    });
    let (arg_count, type_count) = (key_args.len(), key_types.len());
    // `mut` only where a part is added, or it would be an unused `mut`.
    let mutable = (arg_count + type_count > 0).then(|| quote!(mut));
    quote!({
        let #mutable #key = #private::CallKey::new(#name, #version, #arg_count, #type_count);
        #(#args)*
        #(#types)*
        #key.finish()
    })
}

/// A statement binding the memo handle, and the expression that checks it
/// and yields `&Memo` (its errors at the memo's expression or type).
fn memo_handle(plan: &Plan) -> (TokenStream, TokenStream) {
    let krate = &plan.krate;
    match &plan.memo {
        MemoSource::Expr(expr) => {
            let private = private_path(krate, expr.span());
            let handle = local("__memo_handle", expr.span());
            (
                quote!(let #handle = &(#expr);),
                quote_spanned!(expr.span()=> #private::memo_of(#handle)),
            )
        }
        MemoSource::Param(param, span) => {
            let private = private_path(krate, *span);
            let handle = local("__memo_handle", *span);
            let mut param = param.clone();
            param.set_span(param.span().located_at(*span));
            (
                quote!(let #handle = &#param;),
                quote_spanned!(*span=> #private::memo_param(#handle)),
            )
        }
    }
}

/// The memo binding and the `&Memo` expression of the plan's scope: the
/// run's memo as is, or (`scope = shared`) its shared memo, bound to a
/// local of its own because `Call` borrows it. The default adds nothing.
fn in_scope(plan: &Plan, bind_memo: TokenStream, memo: TokenStream) -> (TokenStream, TokenStream) {
    match plan.scope {
        Scope::Run => (bind_memo, memo),
        Scope::Shared => {
            let private = private_path(&plan.krate, Span::call_site());
            let shared = local("__memo_shared", Span::call_site());
            (
                quote! {
                    #bind_memo
                    let #shared = #private::shared_memo(#memo);
                },
                quote!(&#shared),
            )
        }
    }
}

/// Tracing's trick: an unreachable `return` of the declared type fixes the
/// body's type, so `?` converts into the declared error and a wrong tail
/// expression is reported at the user's expression, not here.
fn fake_return(output: &syn::Type) -> TokenStream {
    let fake = local("__memo_fake_return", output.span());
    quote_spanned! {output.span()=>
        #[allow(
            unreachable_code,
            clippy::diverging_sub_expression,
            clippy::empty_loop,
            clippy::let_unit_value,
            clippy::unreachable,
            clippy::needless_return
        )]
        if false {
            let #fake: #output = loop {};
            return #fake;
        }
    }
}

/// `<crate>::__private`, every token located at `span`, so that a type
/// error in a call through it is reported at `span` (an argument's type, the
/// return type), not at the attribute.
fn private_path(krate: &syn::Path, span: Span) -> TokenStream {
    let krate = located_at(krate.to_token_stream(), span);
    quote_spanned!(span=> #krate::__private)
}

/// `tokens` moved to `span` for error reporting; name resolution is kept.
fn located_at(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut moved = Group::new(group.delimiter(), located_at(group.stream(), span));
                moved.set_span(group.span().located_at(span));
                token = TokenTree::Group(moved);
            } else {
                token.set_span(token.span().located_at(span));
            }
            token
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proc_macro2::{TokenStream, TokenTree};
    use quote::quote;

    use super::memoized;

    #[test]
    fn with_a_crate_path_the_expansion_names_only_that_path() {
        let expanded = memoized(
            quote!(crate = "my_sdk::memo"),
            quote! {
                async fn f(memo: &Memo, n: u8) -> Result<u8, E> { Ok(n) }
            },
        )
        .to_string();
        assert!(
            expanded.contains("my_sdk :: memo :: __private"),
            "{expanded}"
        );
        assert!(!expanded.contains("memo_runtime"), "{expanded}");
        assert!(!expanded.contains("compile_error"), "{expanded}");
    }

    #[test]
    fn inner_attributes_of_the_body_move_onto_the_function() {
        let expanded = memoized(
            quote!(),
            quote! {
                async fn f(memo: &Memo, n: u8) -> Result<u8, E> {
                    #![allow(unused_mut)]
                    let mut m = n;
                    Ok(m)
                }
            },
        )
        .to_string();
        assert!(!expanded.contains("# !"), "{expanded}");
        let attr = expanded.find("# [allow (unused_mut)]").expect(&expanded);
        assert!(attr < expanded.find("async fn f").unwrap(), "{expanded}");
        assert!(
            expanded.contains("let mut m = n ;"),
            "the body is kept: {expanded}"
        );
    }

    #[test]
    fn a_failed_check_still_emits_the_function_once() {
        let expanded = memoized(
            quote!(),
            quote! {
                fn f(memo: &Memo) -> Result<u8, E> { Ok(1) }
            },
        )
        .to_string();
        assert_eq!(expanded.matches("fn f").count(), 1, "{expanded}");
        assert_eq!(expanded.matches("compile_error").count(), 1, "{expanded}");
    }

    #[test]
    fn only_a_shared_scope_asks_for_the_shared_memo() {
        let item = quote! {
            async fn f(memo: &Memo, n: u8) -> Result<u8, E> { Ok(n) }
        };
        let shared = memoized(quote!(scope = shared), item.clone()).to_string();
        assert!(shared.contains("__private :: shared_memo"), "{shared}");
        assert!(!shared.contains("compile_error"), "{shared}");
        for args in [quote!(), quote!(scope = run)] {
            let run = memoized(args, item.clone()).to_string();
            assert!(!run.contains("shared_memo"), "{run}");
        }
    }

    #[test]
    fn only_a_declared_cost_is_passed_to_the_call() {
        let item = quote! {
            async fn f(memo: &Memo, n: u8) -> Result<u8, E> { Ok(n) }
        };
        let declared = memoized(quote!(cost = PRICE * 2.0), item.clone()).to_string();
        assert!(declared.contains(". with_cost (PRICE * 2.0)"), "{declared}");
        let plain = memoized(quote!(), item).to_string();
        assert!(!plain.contains("with_cost"), "{plain}");
    }

    /// Tokens in `tokens`, a group counting one plus what it holds.
    fn token_count(tokens: TokenStream) -> usize {
        tokens
            .into_iter()
            .map(|token| match token {
                TokenTree::Group(group) => 1 + token_count(group.stream()),
                _ => 1,
            })
            .sum()
    }

    /// The tokens `#[memoized]` adds to a typical function, as measured when
    /// this was last changed (issue 28): its free-function form and its
    /// method form with options.
    const ADDED_TOKENS: [(&str, usize); 2] = [("free function", 328), ("method with options", 341)];

    /// How far the expansion may grow past [`ADDED_TOKENS`] before this
    /// fails (and how far it may shrink before the pin must come down).
    const MARGIN_PERCENT: usize = 10;

    /// Every user's crate compiles the expansion once per memoized function,
    /// so its size is build time (issue 28; `tools/compile-cost` measures
    /// it): this pins it, so the gain does not erode unnoticed.
    #[test]
    fn a_typical_expansion_stays_within_its_token_budget() {
        let free = quote! {
            pub async fn draft(memo: &Memo, id: u64, name: &str, tag: &[u32]) -> memo_runtime::Result<u64> {
                Ok(id + name.len() as u64 + tag.len() as u64)
            }
        };
        let method = quote! {
            pub async fn draft(&self, memo: &Memo, id: u64, name: &str, tag: &[u32]) -> memo_runtime::Result<u64> {
                Ok(id + name.len() as u64 + tag.len() as u64)
            }
        };
        let cases = [
            (quote!(), free),
            (quote!(version = 2, skip(self, tag)), method),
        ];
        for ((args, item), (form, pinned)) in cases.into_iter().zip(ADDED_TOKENS) {
            let expanded = memoized(args, item.clone());
            assert!(
                !expanded.to_string().contains("compile_error"),
                "{expanded}"
            );
            let added = token_count(expanded) - token_count(item);
            let most = pinned * (100 + MARGIN_PERCENT) / 100;
            let least = pinned * (100 - MARGIN_PERCENT) / 100;
            assert!(
                added <= most,
                "the expansion of a {form} grew to {added} added tokens, more than \
                 {MARGIN_PERCENT}% over the {pinned} pinned: every memoized function \
                 in every user's crate compiles them (measure with tools/compile-cost)"
            );
            assert!(
                added >= least,
                "the expansion of a {form} shrank to {added} added tokens: lower its \
                 pin in ADDED_TOKENS from {pinned} to {added}, so the margin stays tight"
            );
        }
    }
}
