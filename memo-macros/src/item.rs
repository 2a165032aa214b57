//! Parses the function `#[memoized]` applies to: its signature strictly,
//! its body as tokens, re-emitted as written (tokio-macros' and
//! tracing-attributes' approach).

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::{ToTokens, TokenStreamExt};
use syn::parse::{Parse, ParseStream};
use syn::{AttrStyle, Attribute, Signature, Visibility, braced, token};

/// An `fn` item with its body kept as tokens.
pub(crate) struct MemoFn {
    /// The attributes before the function.
    pub(crate) attrs: Vec<Attribute>,
    /// The inner attributes at the start of the body (`#![allow(...)]`).
    pub(crate) inner_attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    pub(crate) sig: Signature,
    brace: token::Brace,
    /// The body after its inner attributes, untouched.
    body: TokenStream,
}

impl Parse for MemoFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        let content;
        let brace = braced!(content in input);
        let inner_attrs = content.call(Attribute::parse_inner)?;
        let body = content.parse()?;
        Ok(MemoFn {
            attrs,
            inner_attrs,
            vis,
            sig,
            brace,
            body,
        })
    }
}

impl MemoFn {
    /// The body's inner attributes as outer ones, for the function: the
    /// body is wrapped in generated code where an inner attribute cannot
    /// stand, and on the function they apply to the body all the same.
    pub(crate) fn inner_attrs_as_outer(&self) -> impl Iterator<Item = Attribute> + '_ {
        self.inner_attrs.iter().cloned().map(|mut attr| {
            attr.style = AttrStyle::Outer;
            attr
        })
    }

    /// The body without its inner attributes, as a block with the original
    /// braces' span.
    pub(crate) fn block(&self) -> Group {
        let mut block = Group::new(Delimiter::Brace, self.body.clone());
        block.set_span(self.brace.span.join());
        block
    }
}

impl ToTokens for MemoFn {
    /// The function exactly as written.
    fn to_tokens(&self, tokens: &mut TokenStream) {
        tokens.append_all(&self.attrs);
        self.vis.to_tokens(tokens);
        self.sig.to_tokens(tokens);
        self.brace.surround(tokens, |tokens| {
            tokens.append_all(&self.inner_attrs);
            tokens.extend(self.body.clone());
        });
    }
}
