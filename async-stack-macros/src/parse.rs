//! Parsing: the attribute's arguments and the annotated item, into syntax
//! trees.
//!
//! Everything that can be decided from the arguments and the kind of item
//! alone is decided here: unknown or repeated keys, a name that is not a
//! non-empty string literal, `skip` (the item is then left as it is,
//! whatever it is), a `name` on a block, and a file module (`mod name;`),
//! whose items the attribute cannot see. Checks that need the function's
//! signature live in [`crate::validate`]. Every error is a [`syn::Error`]
//! spanned at the token the user has to change.

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
    /// `skip`: leave the item alone. Always the only argument.
    pub skip: Option<Ident>,
}

/// The arguments and the fn they annotate.
pub(crate) struct Parsed {
    pub args: Args,
    pub item: ItemFn,
}

/// What the attribute is on, and what becomes of it.
pub(crate) enum Annotated {
    /// `#[traced_async(skip)]` on any item: it is emitted unchanged.
    Skipped,
    /// A fn, instrumented by [`crate::validate`] and [`crate::expand`].
    Fn(Parsed),
    /// An `impl` block, a `trait` or an inline `mod`, whose `async fn`s
    /// [`crate::block`] instruments. Block attributes take no argument.
    Block(Item),
}

/// Parses the attribute arguments and the item.
pub(crate) fn parse(args: TokenStream, item: TokenStream) -> Result<Annotated> {
    let args = Args::parse.parse2(args)?;
    if args.skip.is_some() {
        return Ok(Annotated::Skipped);
    }
    match syn::parse2::<Item>(item.clone())? {
        Item::Fn(function) => Ok(Annotated::Fn(Parsed {
            args,
            item: function,
        })),
        block @ (Item::Impl(_) | Item::Trait(_) | Item::Mod(_)) => {
            if let Some(name) = &args.name {
                return Err(name_on_block(name));
            }
            if let Item::Mod(
                module @ syn::ItemMod {
                    content: None,
                    semi: Some(semi),
                    ..
                },
            ) = &block
            {
                return Err(file_module(module, *semi));
            }
            Ok(Annotated::Block(block))
        }
        other => Err(not_a_fn(other, item)),
    }
}

/// Whether `attr` is a `#[traced_async(skip)]` marker. Any other arguments
/// make it an attribute of its own, which reports them when it expands.
pub(crate) fn is_skip_marker(attr: &syn::Attribute) -> bool {
    is_traced_async(attr.path())
        && attr
            .parse_args_with(Args::parse)
            .is_ok_and(|args| args.skip.is_some())
}

/// `traced_async`, `async_stack::traced_async`, ...
pub(crate) fn is_traced_async(path: &syn::Path) -> bool {
    path.segments
        .last()
        .is_some_and(|segment| segment.ident == "traced_async")
}

impl Parse for Args {
    fn parse(input: ParseStream) -> Result<Self> {
        let mut name = None;
        let mut skip: Option<Ident> = None;
        while !input.is_empty() {
            if !input.peek(Ident::peek_any) {
                return Err(input.error("expected `name = \"...\"`"));
            }
            let key = input.call(Ident::parse_any)?;
            if skip.is_some() || (key == "skip" && name.is_some()) {
                return Err(Error::new(
                    key.span(),
                    "`skip` leaves the item uninstrumented, and takes no other argument",
                ));
            }
            if key == "skip" {
                if input.peek(Token![=]) {
                    let eq = input.parse::<Token![=]>()?;
                    return Err(Error::new(eq.span, "`skip` takes no value"));
                }
                if !input.is_empty() {
                    input.parse::<Token![,]>()?;
                }
                skip = Some(key);
                continue;
            }
            if key != "name" {
                let message = format!(
                    "unknown argument `{key}`; the arguments are `name = \"...\"` and `skip`"
                );
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
        Ok(Args { name, skip })
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

/// `name = ".."` on a block, which holds many fns.
fn name_on_block(name: &LitStr) -> Error {
    Error::new(
        name.span(),
        "a `name` names one fn: put #[traced_async(name = \"...\")] on that fn inside the block",
    )
}

/// `mod name;`: its items are in another file, out of the attribute's
/// sight (on stable Rust, a file module cannot carry an inner attribute
/// macro either).
fn file_module(module: &syn::ItemMod, semi: Token![;]) -> Error {
    let ident = &module.ident;
    let message = format!(
        "#[traced_async] cannot see into `mod {ident};`, whose items are in another file\n\
         help: put #[traced_async] on the impl blocks and async fns in that file, \
         or write the module inline: `mod {ident} {{ .. }}`"
    );
    let mod_token = module.mod_token;
    Error::new_spanned(quote::quote!(#mod_token #ident #semi), message)
}

/// Any other item: a fn without a body in a trait, a struct, ...
fn not_a_fn(item: Item, tokens: TokenStream) -> Error {
    if let Item::Verbatim(_) = item {
        // `async fn f();` in a trait: nothing to instrument.
        if let Ok(TraitItemFn {
            default: None,
            semi_token: Some(semi),
            ..
        }) = syn::parse2::<TraitItemFn>(tokens)
        {
            return Error::new(
                semi.span(),
                "#[traced_async] needs a function body; put it on the trait's impls, \
                 or on a default method",
            );
        }
    }
    Error::new(
        keyword_span(&item),
        "#[traced_async] can only be applied to an `async fn`, \
         or to an `impl` block, `trait` or inline `mod` to instrument the `async fn`s inside",
    )
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
        Item::Static(item) => item.static_token.span,
        Item::Struct(item) => item.struct_token.span,
        Item::TraitAlias(item) => item.trait_token.span,
        Item::Type(item) => item.type_token.span,
        Item::Union(item) => item.union_token.span,
        Item::Use(item) => item.use_token.span,
        _ => Span::call_site(),
    }
}
