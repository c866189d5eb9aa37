//! Parsing: the attribute's arguments and the annotated item, into syntax
//! trees.
//!
//! Everything that can be decided from the arguments alone is decided here
//! (unknown or repeated keys, a name that is not a non-empty string
//! literal); checks that need the function's signature live in
//! [`crate::validate`]. Every error is a [`syn::Error`] spanned at the token
//! the user has to change.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprLit, Ident, Item, ItemFn, Lit, LitStr, Result, Token, TraitItemFn};

/// The parsed `#[traced_async(...)]` arguments.
pub(crate) struct Args {
    /// `name = "..."`: the explicit frame name, already checked to be a
    /// non-empty string literal.
    pub name: Option<LitStr>,
}

/// The arguments and the item they annotate.
pub(crate) struct Parsed {
    pub args: Args,
    pub item: ItemFn,
}

/// Parses the attribute arguments and the item.
pub(crate) fn parse(args: TokenStream, item: TokenStream) -> Result<Parsed> {
    let args = Args::parse.parse2(args)?;
    let item = parse_fn(item)?;
    Ok(Parsed { args, item })
}

impl Parse for Args {
    fn parse(input: ParseStream) -> Result<Self> {
        let mut name = None;
        while !input.is_empty() {
            if !input.peek(Ident::peek_any) {
                return Err(input.error("expected `name = \"...\"`"));
            }
            let key = input.call(Ident::parse_any)?;
            if key != "name" {
                let message =
                    format!("unknown argument `{key}`; the only argument is `name = \"...\"`");
                return Err(Error::new(key.span(), message));
            }
            if name.is_some() {
                return Err(Error::new(key.span(), "duplicate `name` argument"));
            }
            if !input.peek(Token![=]) {
                return Err(Error::new(key.span(), "expected `name = \"...\"`"));
            }
            let eq = input.parse::<Token![=]>()?;
            if input.is_empty() || input.peek(Token![,]) {
                return Err(Error::new(eq.span, "expected a string literal after `=`"));
            }
            name = Some(parse_name(input)?);
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(Args { name })
    }
}

/// Parses the value of `name = ...`: a non-empty string literal.
fn parse_name(input: ParseStream) -> Result<LitStr> {
    const EXPECTED: &str = "expected a string literal, as in `name = \"fetch_user\"`";
    let value: Expr = input
        .parse()
        .map_err(|error| Error::new(error.span(), EXPECTED))?;
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(name),
            attrs,
        }) if attrs.is_empty() => {
            if name.value().is_empty() {
                return Err(Error::new(name.span(), "the `name` must not be empty"));
            }
            Ok(name)
        }
        other => Err(Error::new_spanned(other, EXPECTED)),
    }
}

/// Parses the annotated item, which must be a function with a body.
fn parse_fn(item: TokenStream) -> Result<ItemFn> {
    match syn::parse2::<Item>(item.clone())? {
        Item::Fn(function) => Ok(function),
        Item::Verbatim(_) => match syn::parse2::<TraitItemFn>(item) {
            // `async fn f();` in a trait: nothing to instrument.
            Ok(TraitItemFn {
                default: None,
                semi_token: Some(semi),
                ..
            }) => Err(Error::new(
                semi.span(),
                "#[traced_async] needs a function body; put it on the trait's impls, \
                 or on a default method",
            )),
            _ => Err(not_a_fn(Span::call_site())),
        },
        Item::Impl(item) => Err(on_block(item.impl_token.span)),
        Item::Trait(item) => Err(on_block(item.trait_token.span)),
        other => Err(not_a_fn(keyword_span(&other))),
    }
}

fn on_block(span: Span) -> Error {
    Error::new(
        span,
        "#[traced_async] goes on each `async fn` inside the block, not on the block itself",
    )
}

fn not_a_fn(span: Span) -> Error {
    Error::new(span, "#[traced_async] can only be applied to an `async fn`")
}

/// The span of the keyword that says what kind of item this is (`struct`,
/// `impl`, ...), so an error points at one token and not the whole item.
fn keyword_span(item: &Item) -> Span {
    match item {
        Item::Const(item) => item.const_token.span,
        Item::Enum(item) => item.enum_token.span,
        Item::ExternCrate(item) => item.extern_token.span,
        Item::ForeignMod(item) => item.abi.extern_token.span,
        Item::Macro(item) => item.mac.path.span(),
        Item::Mod(item) => item.mod_token.span,
        Item::Static(item) => item.static_token.span,
        Item::Struct(item) => item.struct_token.span,
        Item::TraitAlias(item) => item.trait_token.span,
        Item::Type(item) => item.type_token.span,
        Item::Union(item) => item.union_token.span,
        Item::Use(item) => item.use_token.span,
        _ => Span::call_site(),
    }
}
