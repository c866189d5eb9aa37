//! Validation: checks that need the function's signature and body, and
//! settles what the frame will be called.
//!
//! Accepted are an `async fn` (free, inherent method, trait method with a
//! body, trait impl method) and a plain `fn` that `#[async_trait]` has already
//! rewritten (see [`crate::async_trait`]). Rejected, each at its own token:
//! `const fn`, any other non-`async` fn, and a second `#[traced_async]` on the
//! same fn.

use syn::ext::IdentExt;
use syn::{Error, ItemFn, LitStr, Result};

use crate::async_trait;
use crate::parse::{Parsed, is_traced_async};

/// A function that can be instrumented, with its frame's name.
pub(crate) struct Validated {
    /// The name given to `CallSite::new`: the explicit `name = "..."`, or the
    /// function's identifier (without `r#`), spanned at the identifier.
    pub name: LitStr,
    /// Whether `name` was given explicitly.
    pub explicit_name: bool,
    pub item: ItemFn,
}

pub(crate) fn validate(Parsed { args, mut item }: Parsed) -> Result<Validated> {
    let sig = &item.sig;
    if let Some(constness) = sig.constness {
        return Err(Error::new(
            constness.span,
            "#[traced_async] cannot be applied to a `const fn`",
        ));
    }
    if let Some(again) = item.attrs.iter().find(|attr| is_traced_async(attr.path())) {
        return Err(Error::new_spanned(
            again,
            "duplicate #[traced_async] attribute",
        ));
    }
    if sig.asyncness.is_none() && async_trait::boxed_future(&mut item.block).is_none() {
        return Err(Error::new(
            item.sig.fn_token.span,
            "#[traced_async] can only be applied to an `async fn`\n\
             help: put it above attributes that make the fn sync, like #[tokio::main]\n\
             help: with async-trait, put #[async_trait] on the impl and #[traced_async] on its methods",
        ));
    }
    let (name, explicit_name) = match args.name {
        Some(name) => (name, true),
        None => {
            let ident = &item.sig.ident;
            (LitStr::new(&ident.unraw().to_string(), ident.span()), false)
        }
    };
    Ok(Validated {
        name,
        explicit_name,
        item,
    })
}
