//! Checks the options against the function signature and turns them into a
//! [`Plan`] for the expansion: checked values, each keeping only the span a
//! later type error must point at. Every problem is collected, each at
//! its own token, and reported together.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Expr, FnArg, GenericParam, Ident, Pat, ReturnType, Signature, Type};

use crate::attr::{Options, Scope, closest};

/// Everything the expansion needs, checked.
pub(crate) struct Plan {
    /// The path of the runtime crate (`::memo_runtime` unless overridden).
    pub(crate) krate: syn::Path,
    /// The stable name that goes into the key.
    pub(crate) name: String,
    /// The version that goes into the key.
    pub(crate) version: u32,
    /// Where the memo comes from.
    pub(crate) memo: MemoSource,
    /// The arguments that go into the key, in order.
    pub(crate) key_args: Vec<KeyArg>,
    /// The types that go into the key, in order (see `memo_runtime`'s
    /// `memoize::call_key`).
    pub(crate) key_types: Vec<KeyType>,
    /// The declared return type.
    pub(crate) output: Box<Type>,
    /// Where the call's entry lives.
    pub(crate) scope: Scope,
    /// What one run of the body costs, in dollars (`cost = ..`), if declared.
    pub(crate) cost: Option<Expr>,
}

/// Where the memo comes from.
pub(crate) enum MemoSource {
    /// `memo = <expr>`: any expression yielding a memo handle.
    Expr(Expr),
    /// The one parameter whose type is named `Memo`; the expansion checks
    /// that it really is memo's `Memo`. The span is the type's.
    Param(Ident, Span),
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

/// One type in the key.
pub(crate) enum KeyType {
    /// The implementing type of a method.
    SelfType,
    /// A type parameter.
    Param(Ident),
    /// A const parameter: its value.
    Const(Ident),
    /// The type of an `impl Trait` argument, named by the argument.
    OfArg(Ident),
}

/// A parameter as the checks see it.
struct Param<'a> {
    /// Its binding (`self` for the receiver), if it has a plain one.
    name: Option<Ident>,
    arg: &'a FnArg,
}

/// Checks `attr` against `sig`.
///
/// # Errors
///
/// All problems found, combined into one error.
pub(crate) fn check(mut attr: Options, sig: &Signature) -> syn::Result<Plan> {
    let mut errors = Errors::default();
    check_shape(sig, &mut errors);

    let params: Vec<Param<'_>> = sig.inputs.iter().map(param).collect();
    let has_self = mentions_self(sig);
    let skip = Skip(attr.skip.take().map(|(names, _)| names).unwrap_or_default());
    check_skip(&skip, sig, &params, has_self, &mut errors);
    let memo = memo_source(&mut attr, sig, &params, &mut errors);
    // The parameter that is the memo, never part of the key: the one named
    // by `memo = param`, or else each candidate by type (the one memo, or
    // an error reported already).
    let is_memo = |p: &Param<'_>| match &memo {
        Some(MemoSource::Expr(expr)) => named_param(expr)
            .is_some_and(|named| p.name.as_ref().is_some_and(|name| named.is_ident(name))),
        Some(MemoSource::Param(..)) | None => p.memo_typed(),
    };

    let mut key_args = Vec::new();
    let mut impl_trait_args = Vec::new();
    for p in params.iter().filter(|p| !is_memo(p)) {
        let Some(name) = &p.name else {
            errors.push(unnamed(p.arg));
            continue;
        };
        if skip.contains(name) {
            continue;
        }
        match key_arg(p, name) {
            Ok(arg) => key_args.push(arg),
            Err(e) => errors.push(e),
        }
        if let FnArg::Typed(typed) = p.arg
            && has_impl_trait(typed.ty.to_token_stream())
        {
            impl_trait_args.push(KeyType::OfArg(name.clone()));
        }
    }
    let mut key_types = Vec::new();
    if has_self && !skip.contains_str("Self") {
        key_types.push(KeyType::SelfType);
    }
    for param in &sig.generics.params {
        match param {
            GenericParam::Type(ty) if !skip.contains(&ty.ident) => {
                key_types.push(KeyType::Param(ty.ident.clone()));
            }
            GenericParam::Const(c) if !skip.contains(&c.ident) => {
                key_types.push(KeyType::Const(c.ident.clone()));
            }
            _ => {}
        }
    }
    key_types.extend(impl_trait_args);

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
        key_types,
        output: output.expect("a return type, or an error was reported"),
        scope: attr.scope.take().map_or(Scope::Run, |(scope, _)| scope),
        cost: attr.cost.take().map(|(cost, _)| cost),
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

/// The parameter `memo = ...` names by itself: `memo = m`, `&m`, `&mut m`.
fn named_param(expr: &Expr) -> Option<&syn::Path> {
    match expr {
        Expr::Path(path) if path.qself.is_none() => Some(&path.path),
        Expr::Reference(reference) => named_param(&reference.expr),
        Expr::Paren(paren) => named_param(&paren.expr),
        Expr::Group(group) => named_param(&group.expr),
        _ => None,
    }
}

impl Param<'_> {
    /// Whether its type is named `Memo`: a candidate for the memo.
    fn memo_typed(&self) -> bool {
        match self.arg {
            FnArg::Typed(typed) => is_memo_type(&typed.ty),
            FnArg::Receiver(_) => false,
        }
    }
}

fn param(arg: &FnArg) -> Param<'_> {
    let name = match arg {
        FnArg::Receiver(receiver) => Some(Ident::new("self", receiver.self_token.span)),
        FnArg::Typed(typed) => match &*typed.pat {
            Pat::Ident(pat) => Some(pat.ident.clone()),
            _ => None,
        },
    };
    Param { name, arg }
}

/// Whether the function is a method: it takes `self` or names `Self`, so
/// its implementing type is part of its identity. (An associated function
/// that does neither cannot be told from a free one by its tokens.)
fn mentions_self(sig: &Signature) -> bool {
    sig.receiver().is_some() || has_ident(sig.to_token_stream(), "Self")
}

fn has_impl_trait(tokens: TokenStream) -> bool {
    has_ident(tokens, "impl")
}

fn has_ident(tokens: TokenStream, wanted: &str) -> bool {
    tokens.into_iter().any(|token| match token {
        TokenTree::Ident(ident) => ident == wanted,
        TokenTree::Group(group) => has_ident(group.stream(), wanted),
        _ => false,
    })
}

/// Whether `ty` is `Memo`, `&Memo` or `&mut Memo` (under any path): a
/// candidate for the memo, checked by type in the expansion.
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

/// The names in `skip(...)`, compared as written without `r#`: `skip(type)`
/// skips the parameter `r#type`.
struct Skip(Vec<Ident>);

impl Skip {
    fn contains(&self, name: &Ident) -> bool {
        self.contains_str(&name.unraw().to_string())
    }

    fn contains_str(&self, name: &str) -> bool {
        self.0.iter().any(|skipped| skipped.unraw() == name)
    }
}

fn check_skip(
    skip: &Skip,
    sig: &Signature,
    params: &[Param<'_>],
    has_self: bool,
    errors: &mut Errors,
) {
    let names: Vec<String> = params
        .iter()
        .filter_map(|p| p.name.as_ref().map(|n| n.unraw().to_string()))
        .collect();
    let mut types: Vec<String> = sig
        .generics
        .params
        .iter()
        .filter_map(|param| match param {
            GenericParam::Type(ty) => Some(ty.ident.to_string()),
            GenericParam::Const(c) => Some(c.ident.to_string()),
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    if has_self {
        types.insert(0, "Self".to_owned());
    }
    for (i, skipped) in skip.0.iter().enumerate() {
        let written = skipped.unraw().to_string();
        if skip.0[..i].iter().any(|earlier| earlier.unraw() == written) {
            errors.push(syn::Error::new(
                skipped.span(),
                format!("`{written}` is already skipped; name each parameter once in `skip(...)`"),
            ));
        } else if !names.contains(&written) && !types.contains(&written) {
            let all = names.iter().chain(&types).map(String::as_str);
            let hint = match closest(&written, all) {
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

/// The memo: `memo = <expr>` if given (then no parameter is taken for the
/// memo by its type), else the one parameter whose type is named `Memo`.
fn memo_source(
    attr: &mut Options,
    sig: &Signature,
    params: &[Param<'_>],
    errors: &mut Errors,
) -> Option<MemoSource> {
    if let Some((expr, _)) = attr.memo.take() {
        return Some(MemoSource::Expr(expr));
    }
    let mut memos = params.iter().filter(|p| p.memo_typed());
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
                 holds the entries with `#[memoized(memo = {}, skip({}))]`",
                name(first),
                name(second),
                name(first),
                name(second),
            ),
        ));
        return None;
    }
    match (&first.name, first.arg) {
        (Some(name), FnArg::Typed(typed)) => {
            Some(MemoSource::Param(name.clone(), type_span(&typed.ty)))
        }
        _ => {
            errors.push(unnamed(first.arg));
            None
        }
    }
}

fn key_arg(p: &Param<'_>, name: &Ident) -> syn::Result<KeyArg> {
    match p.arg {
        FnArg::Receiver(receiver) => {
            if let Some(mutability) = mutable_reference(&receiver.ty) {
                return Err(syn::Error::new(
                    mutability,
                    "`#[memoized]` cannot put `&mut self` in the key: on a hit the body \
                     does not run, so its changes to `self` would silently not happen; \
                     take `&self` or `self`, or, if a hit needs none of those changes, \
                     leave it out of the key with `skip(self)`",
                ));
            }
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
            let written = name.unraw();
            if let Some(mutability) = mutable_reference(&typed.ty) {
                return Err(syn::Error::new(
                    mutability,
                    format!(
                        "`#[memoized]` cannot put the `&mut` argument `{written}` in the key: \
                         on a hit the body does not run, so its changes to `{written}` would \
                         silently not happen; take it by value or by `&`, or, if a hit needs \
                         none of those changes (a connection, a scratch buffer), leave it out \
                         of the key with `skip({written})`"
                    ),
                ));
            }
            if let Some(set) = hash_set(&typed.ty) {
                return Err(syn::Error::new(
                    set.span(),
                    format!(
                        "`#[memoized]` cannot key on a `HashSet`: its iteration order is \
                         random, so equal sets would give different keys; take a `BTreeSet`, \
                         or leave `{written}` out of the key with `skip({written})`"
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

/// The `mut` of `ty` if it is `&mut T` (under parentheses).
fn mutable_reference(ty: &Type) -> Option<Span> {
    match ty {
        Type::Reference(r) => r.mutability.map(|m| m.span),
        Type::Group(g) => mutable_reference(&g.elem),
        Type::Paren(p) => mutable_reference(&p.elem),
        _ => None,
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
