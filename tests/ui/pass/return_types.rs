// `?`, early `return` and `impl Trait` return types type-check as in the
// plain `async fn`.
#![deny(warnings)]

use std::fmt::Display;
use std::num::ParseIntError;

use async_stack::traced_async;

#[derive(Debug)]
struct MyError;

impl From<ParseIntError> for MyError {
    fn from(_: ParseIntError) -> Self {
        MyError
    }
}

#[traced_async]
async fn question_mark(s: &str) -> Result<u32, MyError> {
    let n: u32 = s.parse()?; // needs the error type: From<ParseIntError>
    Ok(n)
}

#[traced_async]
async fn boxed_error(s: &str) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    Ok(s.parse::<u32>()?)
}

#[traced_async]
async fn option(v: &[u32]) -> Option<u32> {
    let first = v.first()?;
    Some(first + 1)
}

#[traced_async]
async fn early_return(n: u32) -> u32 {
    if n > 10 {
        return 10;
    }
    n
}

#[traced_async]
async fn returns_impl(n: u32) -> impl Display {
    n * 2
}

#[traced_async]
async fn result_of_impl(s: &str) -> Result<impl Display, MyError> {
    let n: u32 = s.parse()?;
    Ok(n)
}

#[traced_async]
async fn impl_iterator<'a>(v: &'a [u32]) -> impl Iterator<Item = &'a u32> + 'a {
    v.iter()
}

#[traced_async]
async fn diverges() -> u32 {
    if true {
        return 3;
    }
    unreachable!()
}

fn main() {
    futures::executor::block_on(async {
        assert_eq!(question_mark("4").await.unwrap(), 4);
        assert!(question_mark("x").await.is_err());
        assert_eq!(boxed_error("5").await.unwrap(), 5);
        assert_eq!(option(&[1]).await, Some(2));
        assert_eq!(option(&[]).await, None);
        assert_eq!(early_return(20).await, 10);
        assert_eq!(early_return(2).await, 2);
        assert_eq!(returns_impl(3).await.to_string(), "6");
        assert_eq!(result_of_impl("7").await.unwrap().to_string(), "7");
        assert_eq!(impl_iterator(&[1, 2]).await.count(), 2);
        assert_eq!(diverges().await, 3);
    });
}
