//! Checks the options against the function signature and turns them into a
//! span-free [`Plan`] for the expansion. Every problem is collected, each at
//! its own token, and reported together.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Expr, FnArg, Ident, Pat, ReturnType, Signature, Type};

use crate::attr::{Attr, closest};

/// Everything the expansion needs, checked.
pub(crate) struct Plan {
    /// The path of the runtime crate (`::memo_runtime` unless overridden).
    pub(crate) krate: syn::Path,
    /// The stable name that goes into the key.
    pub(crate) name: String,
    /// The version that goes into the key.
    pub(crate) version: u32,
    /// The expression that yields the memo (a parameter or `memo = ...`).
    pub(crate) memo: Expr,
    /// The arguments that go into the key, in order.
    pub(crate) key_args: Vec<KeyArg>,
    /// The declared return type.
    pub(crate) output: Box<Type>,
}

/// One argument of the key.
pub(crate) struct KeyArg {
    /// An expression borrowing the argument's value.
    pub(crate) value: TokenStream,
    /// Where a type error about the argument belongs: its type, or `self`.
    pub(crate) span: Span,
    /// Whether this is the receiver (its errors suggest `skip(self)`).
    pub(crate) receiver: bool,
}

/// A parameter as the checks see it.
struct Param<'a> {
    /// Its binding (`self` for the receiver), if it has a plain one.
    name: Option<Ident>,
    arg: &'a FnArg,
    is_memo: bool,
}

/// Checks `attr` against `sig`.
///
/// # Errors
///
/// All problems found, combined into one error.
pub(crate) fn check(mut attr: Attr, sig: &Signature) -> syn::Result<Plan> {
    let mut errors = Errors::default();
    check_shape(sig, &mut errors);

    let mut params: Vec<Param<'_>> = sig.inputs.iter().map(param).collect();
    // `memo = some_param` makes that parameter the memo, whatever its type.
    if let Some(Expr::Path(path)) = attr.memo.get() {
        for p in &mut params {
            if p.name.as_ref().is_some_and(|name| path.path.is_ident(name)) {
                p.is_memo = true;
            }
        }
    }
    let skip = attr.skip.take().map(|(names, _)| names).unwrap_or_default();
    check_skip(&skip, &params, &mut errors);
    let memo = memo_source(&mut attr, sig, &params, &mut errors);

    let skipped = |name: &Ident| skip.iter().any(|s| s == name);
    let mut key_args = Vec::new();
    for p in &params {
        if p.is_memo || p.name.as_ref().is_some_and(skipped) {
            continue;
        }
        match key_arg(p) {
            Ok(arg) => key_args.push(arg),
            Err(e) => errors.push(e),
        }
    }
    let output = match &sig.output {
        ReturnType::Type(_, ty) => Some(ty.clone()),
        ReturnType::Default => {
            errors.push(syn::Error::new(
                sig.paren_token.span.close(),
                "`#[memoized]` needs a `Result` return type: only `Ok` values are \
                 committed; write `-> Result<T, E>`, with `E: From<memo_runtime::Error>`",
            ));
            None
        }
    };

    errors.finish()?;
    let krate = match attr.krate.take() {
        Some((path, _)) => path,
        None => syn::parse_quote!(::memo_runtime),
    };
    Ok(Plan {
        krate,
        name: match attr.name.take() {
            Some((name, _)) => name,
            None => sig.ident.unraw().to_string(),
        },
        version: attr.version.take().map_or(0, |(v, _)| v),
        memo: memo.expect("a memo source, or an error was reported"),
        key_args,
        output: output.expect("a return type, or an error was reported"),
    })
}

fn check_shape(sig: &Signature, errors: &mut Errors) {
    if let Some(constness) = &sig.constness {
        errors.push(syn::Error::new(
            constness.span,
            "`#[memoized]` cannot apply to a `const fn`: it reads and writes object \
             storage at run time; write `async fn` instead",
        ));
    }
    // A `const fn` gets one error, which says what to write instead.
    if sig.asyncness.is_none() && sig.constness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span,
            "`#[memoized]` needs an `async fn`; add `async`, or call \
             `Memo::content_get` / `Memo::content_put` directly",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(syn::Error::new(
            variadic.span(),
            "`#[memoized]` cannot key on variadic arguments; remove `...`",
        ));
    }
}

fn param(arg: &FnArg) -> Param<'_> {
    match arg {
        FnArg::Receiver(receiver) => Param {
            name: Some(Ident::new("self", receiver.self_token.span)),
            arg,
            is_memo: false,
        },
        FnArg::Typed(typed) => Param {
            name: match &*typed.pat {
                Pat::Ident(pat) => Some(pat.ident.clone()),
                _ => None,
            },
            arg,
            is_memo: is_memo_type(&typed.ty),
        },
    }
}

/// Whether `ty` is `Memo`, `&Memo` or `&mut Memo` (under any path).
fn is_memo_type(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => is_memo_type_owned(&r.elem),
        ty => is_memo_type_owned(ty),
    }
}

fn is_memo_type_owned(ty: &Type) -> bool {
    match ty {
        Type::Group(g) => is_memo_type_owned(&g.elem),
        Type::Paren(p) => is_memo_type_owned(&p.elem),
        Type::Path(p) => {
            p.qself.is_none()
                && p.path.segments.last().is_some_and(|last| {
                    last.ident == "Memo" && matches!(last.arguments, syn::PathArguments::None)
                })
        }
        _ => false,
    }
}

fn check_skip(skip: &[Ident], params: &[Param<'_>], errors: &mut Errors) {
    let names: Vec<String> = params
        .iter()
        .filter_map(|p| p.name.as_ref().map(|n| n.unraw().to_string()))
        .collect();
    for (i, skipped) in skip.iter().enumerate() {
        let written = skipped.unraw().to_string();
        if skip[..i].iter().any(|earlier| earlier == skipped) {
            errors.push(syn::Error::new(
                skipped.span(),
                format!("`{written}` is already skipped; name each parameter once in `skip(...)`"),
            ));
        } else if !names.contains(&written) {
            let hint = match closest(&written, names.iter().map(String::as_str)) {
                Some(near) => format!("did you mean `{near}`?"),
                None if names.is_empty() => "it has no parameters".to_owned(),
                None => format!(
                    "its parameters are {}",
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            errors.push(syn::Error::new(
                skipped.span(),
                format!(
                    "cannot skip `{written}`: the function has no parameter `{written}`; {hint}"
                ),
            ));
        }
    }
}

/// The memo: `memo = <expr>` if given, else the one parameter of memo type.
fn memo_source(
    attr: &mut Attr,
    sig: &Signature,
    params: &[Param<'_>],
    errors: &mut Errors,
) -> Option<Expr> {
    if let Some((expr, _)) = attr.memo.take() {
        return Some(expr);
    }
    let mut memos = params.iter().filter(|p| p.is_memo);
    let Some(first) = memos.next() else {
        errors.push(syn::Error::new(
            sig.paren_token.span.join(),
            "`#[memoized]` needs a memo: add a parameter `memo: &Memo`, or say where it \
             comes from with `#[memoized(memo = ...)]`, e.g. `memo = ctx.memo()`",
        ));
        return None;
    };
    if let Some(second) = memos.next() {
        let name = |p: &Param<'_>| {
            p.name
                .as_ref()
                .map_or_else(|| "_".to_owned(), |n| n.unraw().to_string())
        };
        errors.push(syn::Error::new(
            second.arg.span(),
            format!(
                "`#[memoized]` found two `Memo` parameters, `{}` and `{}`; say which one \
                 holds the entries with `#[memoized(memo = {})]`",
                name(first),
                name(second),
                name(first),
            ),
        ));
        return None;
    }
    match &first.name {
        Some(name) => Some(Expr::Verbatim(name.to_token_stream())),
        None => {
            errors.push(unnamed(first.arg));
            None
        }
    }
}

fn key_arg(p: &Param<'_>) -> syn::Result<KeyArg> {
    match p.arg {
        FnArg::Receiver(receiver) => {
            let self_token = &receiver.self_token;
            let by_value = receiver.reference.is_none() && is_plain_self(&receiver.ty);
            let value = if by_value {
                quote_spanned!(self_token.span=> &#self_token)
            } else {
                quote_spanned!(self_token.span=> &*#self_token)
            };
            Ok(KeyArg {
                value,
                span: self_token.span,
                receiver: true,
            })
        }
        FnArg::Typed(typed) => {
            let Some(name) = &p.name else {
                return Err(unnamed(p.arg));
            };
            if let Some(set) = hash_set(&typed.ty) {
                return Err(syn::Error::new(
                    set.span(),
                    format!(
                        "`#[memoized]` cannot key on a `HashSet`: its iteration order is \
                         random, so equal sets would give different keys; take a `BTreeSet`, \
                         or leave `{name}` out of the key with `skip({name})`"
                    ),
                ));
            }
            // Both tokens at the type, so a missing `Serialize` is reported
            // there; the name keeps resolving to the parameter.
            let span = type_span(&typed.ty);
            let mut name = name.clone();
            name.set_span(name.span().located_at(span));
            Ok(KeyArg {
                value: quote_spanned!(span=> &#name),
                span,
                receiver: false,
            })
        }
    }
}

/// The token that names `ty`: `Ticket` in `&'a mut Ticket` or
/// `crate::Ticket<T>`. (A span cannot cover several tokens on stable.)
fn type_span(ty: &Type) -> Span {
    match ty {
        Type::Reference(r) => type_span(&r.elem),
        Type::Group(g) => type_span(&g.elem),
        Type::Paren(p) => type_span(&p.elem),
        Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| ty.span(), |last| last.ident.span()),
        ty => ty.span(),
    }
}

fn is_plain_self(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"))
}

/// The `HashSet` type at the top of `ty` (under references), if any.
fn hash_set(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Reference(r) => hash_set(&r.elem),
        Type::Group(g) => hash_set(&g.elem),
        Type::Paren(p) => hash_set(&p.elem),
        Type::Path(p) if p.qself.is_none() => p
            .path
            .segments
            .last()
            .is_some_and(|last| last.ident == "HashSet")
            .then_some(ty),
        _ => None,
    }
}

fn unnamed(arg: &FnArg) -> syn::Error {
    let pat = match arg {
        FnArg::Typed(typed) => typed.pat.span(),
        FnArg::Receiver(receiver) => receiver.span(),
    };
    syn::Error::new(
        pat,
        "`#[memoized]` needs a plain name for this parameter to put it in the key; \
         write `name: Type` and destructure it in the body",
    )
}

/// Errors collected across checks, reported as one.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
