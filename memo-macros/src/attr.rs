//! Parses `#[memoized(...)]` options into [`Options`], keeping every value's
//! span so later stages can point at the exact token.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Ident, Lit, LitStr, Token};

mod kw {
    syn::custom_keyword!(memo);
    syn::custom_keyword!(name);
    syn::custom_keyword!(version);
    syn::custom_keyword!(skip);
    syn::custom_keyword!(scope);
    syn::custom_keyword!(cost);
}

/// The option keys, in the order the documentation lists them.
pub(crate) const OPTION_KEYS: [&str; 7] =
    ["memo", "name", "version", "skip", "scope", "cost", "crate"];

/// The values of `scope = ...`, in the order the documentation lists them.
const SCOPES: [&str; 2] = ["run", "shared"];

/// Where a call's entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The memo's run and step (the default).
    Run,
    /// The memo store's shared scope, one entry for every run.
    Shared,
}

/// The options as written, each with the span of its first occurrence.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) memo: SetOnce<Expr>,
    pub(crate) name: SetOnce<String>,
    pub(crate) version: SetOnce<u32>,
    pub(crate) skip: SetOnce<Vec<Ident>>,
    pub(crate) scope: SetOnce<Scope>,
    /// What one run of the body costs, in dollars: any `f64` expression.
    pub(crate) cost: SetOnce<Expr>,
    pub(crate) krate: SetOnce<syn::Path>,
    /// Problems found while parsing that did not stop it: duplicates,
    /// unknown keys, values of the wrong kind.
    pub(crate) errors: Vec<syn::Error>,
}

/// A value that may be given once; a second occurrence is an error at the
/// second key, and the first value stays.
pub(crate) struct SetOnce<T> {
    value: Option<(T, Span)>,
}

impl<T> Default for SetOnce<T> {
    fn default() -> Self {
        SetOnce { value: None }
    }
}

impl<T> SetOnce<T> {
    fn set(&mut self, key: &Ident, value: T, errors: &mut Vec<syn::Error>) {
        if self.value.is_some() {
            errors.push(syn::Error::new(
                key.span(),
                format!("duplicate `{key}` option; give each option once"),
            ));
        } else {
            self.value = Some((value, key.span()));
        }
    }

    /// The value, if it was given, with the span of its key.
    pub(crate) fn take(&mut self) -> Option<(T, Span)> {
        self.value.take()
    }
}

impl Options {
    /// Parses the attribute's arguments (the tokens inside the parentheses).
    pub(crate) fn parse_args(args: TokenStream) -> syn::Result<Options> {
        syn::parse2(args)
    }
}

impl Parse for Options {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut attr = Options::default();
        while !input.is_empty() {
            attr.parse_option(input)?;
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(attr)
    }
}

impl Options {
    fn parse_option(&mut self, input: ParseStream<'_>) -> syn::Result<()> {
        let errors = &mut self.errors;
        let lookahead = input.lookahead1();
        if lookahead.peek(kw::memo) {
            let key = key(input)?;
            let value: Expr = input.parse()?;
            self.memo.set(&key, value, errors);
        } else if lookahead.peek(kw::name) {
            let key = key(input)?;
            let value: Expr = input.parse()?;
            match string_literal(&value) {
                Some(lit) if lit.value().is_empty() => errors.push(syn::Error::new(
                    lit.span(),
                    "`name` cannot be empty; write a stable name such as `name = \"draft_reply\"`",
                )),
                Some(lit) => self.name.set(&key, lit.value(), errors),
                None => errors.push(syn::Error::new(
                    value.span(),
                    "`name` must be a string literal, such as `name = \"draft_reply\"`",
                )),
            }
        } else if lookahead.peek(kw::version) {
            let key = key(input)?;
            let value: Expr = input.parse()?;
            match version_number(&value) {
                Ok(version) => self.version.set(&key, version, errors),
                Err(e) => errors.push(e),
            }
        } else if lookahead.peek(kw::skip) {
            let key: Ident = input.call(Ident::parse_any)?;
            let content;
            syn::parenthesized!(content in input);
            let names =
                Punctuated::<Ident, Token![,]>::parse_terminated_with(&content, Ident::parse_any)?;
            self.skip.set(&key, names.into_iter().collect(), errors);
        } else if lookahead.peek(kw::scope) {
            let key = key(input)?;
            let value: Expr = input.parse()?;
            match scope(&value) {
                Ok(scope) => self.scope.set(&key, scope, errors),
                Err(e) => errors.push(e),
            }
        } else if lookahead.peek(kw::cost) {
            let key = key(input)?;
            let value: Expr = input.parse()?;
            self.cost.set(&key, value, errors);
        } else if lookahead.peek(Token![crate]) {
            let key = key(input)?;
            let value: Expr = input.parse()?;
            match string_literal(&value).map(LitStr::parse::<syn::Path>) {
                Some(Ok(path)) => self.krate.set(&key, path, errors),
                _ => errors.push(syn::Error::new(
                    value.span(),
                    "`crate` must be a path in a string, such as `crate = \"my_sdk::memo_runtime\"`",
                )),
            }
        } else if input.peek(Ident::peek_any) {
            let unknown: Ident = input.call(Ident::parse_any)?;
            errors.push(unknown_option(&unknown));
            skip_to_next_option(input)?;
        } else {
            return Err(lookahead.error());
        }
        Ok(())
    }
}

/// Parses `key =` and returns the key.
fn key(input: ParseStream<'_>) -> syn::Result<Ident> {
    let key = input.call(Ident::parse_any)?;
    input.parse::<Token![=]>()?;
    Ok(key)
}

fn string_literal(value: &Expr) -> Option<&LitStr> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Some(lit),
        _ => None,
    }
}

fn version_number(value: &Expr) -> syn::Result<u32> {
    let not_integer = || {
        syn::Error::new(
            value.span(),
            "`version` must be an integer literal, such as `version = 2`",
        )
    };
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Int(lit), ..
    }) = value
    else {
        return Err(not_integer());
    };
    if !lit.suffix().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`version` takes a plain integer; write `version = {}`",
                lit.base10_digits()
            ),
        ));
    }
    lit.base10_parse::<u32>().map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!("`version` must fit in a `u32` (at most {})", u32::MAX),
        )
    })
}

fn scope(value: &Expr) -> syn::Result<Scope> {
    if let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(quoted),
        ..
    }) = value
    {
        let inner = quoted.value();
        let fix = if SCOPES.contains(&inner.as_str()) {
            format!("remove the quotes: write `scope = {inner}`")
        } else {
            "write `scope = run` (the default) or `scope = shared`, without quotes".to_owned()
        };
        return Err(syn::Error::new(
            value.span(),
            format!("`scope` takes a bare word, not a string; {fix}"),
        ));
    }
    let written = match value {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident(),
        _ => None,
    };
    match written.map(|ident| ident.unraw().to_string()).as_deref() {
        Some("run") => Ok(Scope::Run),
        Some("shared") => Ok(Scope::Shared),
        other => {
            let hint = match other.and_then(|written| closest(written, SCOPES)) {
                Some(near) => format!("did you mean `{near}`? "),
                None => String::new(),
            };
            Err(syn::Error::new(
                value.span(),
                format!(
                    "unknown `scope`; {hint}write `scope = run` (the default: an entry per run \
                     and step) or `scope = shared` (one entry for every run, see \
                     `memo_runtime::shared`)"
                ),
            ))
        }
    }
}

fn unknown_option(unknown: &Ident) -> syn::Error {
    let written = unknown.unraw().to_string();
    let listed = OPTION_KEYS
        .iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let hint = match closest(&written, OPTION_KEYS) {
        Some(near) => format!("did you mean `{near}`? "),
        None => String::new(),
    };
    syn::Error::new(
        unknown.span(),
        format!("unknown `#[memoized]` option `{written}`; {hint}the options are {listed}"),
    )
}

/// Skips an unknown option's value so the options after it are still read
/// and checked.
fn skip_to_next_option(input: ParseStream<'_>) -> syn::Result<()> {
    while !input.is_empty() && !input.peek(Token![,]) {
        input.parse::<proc_macro2::TokenTree>()?;
    }
    Ok(())
}

/// The candidate closest to `written`, if it is close enough to be a typo.
pub(crate) fn closest<'a>(
    written: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::damerau_levenshtein(written, candidate), candidate))
        .filter(|&(distance, candidate)| distance <= candidate.len().max(written.len()) / 3 + 1)
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::{Options, closest};

    #[test]
    fn every_option_is_read_with_its_value() {
        let mut attr = Options::parse_args(quote!(
            memo = ctx.memo(),
            name = "n",
            version = 7,
            skip(a, self),
            scope = shared,
            cost = 0.002,
            crate = "x::y"
        ))
        .unwrap();
        assert!(attr.errors.is_empty());
        assert!(attr.memo.take().is_some());
        assert_eq!(attr.name.take().unwrap().0, "n");
        assert_eq!(attr.version.take().unwrap().0, 7);
        let skipped: Vec<String> = attr
            .skip
            .take()
            .unwrap()
            .0
            .iter()
            .map(|i| i.to_string())
            .collect();
        assert_eq!(skipped, ["a", "self"]);
        assert_eq!(attr.scope.take().unwrap().0, super::Scope::Shared);
        assert!(attr.cost.take().is_some());
        assert!(attr.krate.take().is_some());
    }

    #[test]
    fn a_scope_is_run_or_shared_and_anything_else_is_refused() {
        let scope = |args| Options::parse_args(args).unwrap().scope.take().map(|s| s.0);
        assert_eq!(scope(quote!(scope = run)), Some(super::Scope::Run));
        assert_eq!(scope(quote!(scope = shared)), Some(super::Scope::Shared));
        for bad in [
            quote!(scope = global),
            quote!(scope = "shared"),
            quote!(scope = a::shared),
        ] {
            let attr = Options::parse_args(bad).unwrap();
            assert_eq!(attr.errors.len(), 1);
        }
    }

    #[test]
    fn a_quoted_scope_is_told_to_remove_the_quotes() {
        let message = |args| {
            let attr = Options::parse_args(args).unwrap();
            attr.errors.into_iter().next().unwrap().to_string()
        };
        assert_eq!(
            message(quote!(scope = "shared")),
            "`scope` takes a bare word, not a string; remove the quotes: write `scope = shared`"
        );
        assert_eq!(
            message(quote!(scope = "run")),
            "`scope` takes a bare word, not a string; remove the quotes: write `scope = run`"
        );
        assert!(message(quote!(scope = "global")).contains("without quotes"));
    }

    #[test]
    fn duplicates_and_unknown_options_are_all_reported_and_parsing_goes_on() {
        let mut attr =
            Options::parse_args(quote!(nmae = "a", version = 1, version = 2, name = "b")).unwrap();
        assert_eq!(attr.errors.len(), 2);
        assert_eq!(attr.version.take().unwrap().0, 1, "the first value stays");
        assert_eq!(
            attr.name.take().unwrap().0,
            "b",
            "options after an unknown one are read"
        );
    }

    #[test]
    fn versions_beyond_u32_and_suffixed_literals_are_refused() {
        assert_eq!(
            Options::parse_args(quote!(version = 4294967296))
                .unwrap()
                .errors
                .len(),
            1
        );
        assert_eq!(
            Options::parse_args(quote!(version = 2u8))
                .unwrap()
                .errors
                .len(),
            1
        );
        assert_eq!(
            Options::parse_args(quote!(name = "")).unwrap().errors.len(),
            1
        );
    }

    #[test]
    fn typos_suggest_the_nearest_name_and_strangers_suggest_nothing() {
        assert_eq!(closest("nmae", ["memo", "name"]), Some("name"));
        assert_eq!(closest("clinet", ["client", "body"]), Some("client"));
        assert_eq!(closest("retries", ["memo", "name", "skip"]), None);
    }
}
