// Arguments of every pattern are moved into the future without a warning:
// `_`, destructuring, `ref`/`ref mut` (also behind `&mut`), `x @ ..`,
// `#[cfg]`'d arguments, an unused `self`; and bodies that diverge, are one
// expression, or end in a temporary that borrows an argument.
#![deny(warnings)]

use std::sync::Mutex;

use async_stack::traced_async;

struct Pair(String, String);

struct Session(String);

impl Session {
    #[traced_async]
    async fn finish(self) {}

    #[traced_async]
    async fn finish_mut(mut self, name: String) -> usize {
        self.0 = name;
        self.0.len()
    }
}

#[traced_async]
async fn wild(_: String, (a, _): (String, String)) -> usize {
    a.len()
}

#[traced_async]
async fn refs(ref a: String, (ref mut b, _): (String, u8), &mut (ref mut c, _): &mut (u8, u8)) {
    b.push_str(a);
    *c += 1;
}

#[traced_async]
async fn structs(Pair(left, _): Pair, whole @ Pair { .. }: Pair, [first, ..]: [u8; 2]) -> usize {
    left.len() + whole.1.len() + usize::from(first)
}

#[traced_async]
async fn configured(#[cfg(any())] gone: String, #[cfg(all())] kept: u8) -> u8 {
    kept
}

#[traced_async]
async fn one_expression(x: u32) -> u32 { x + 1 }

#[traced_async]
async fn locked(m: Mutex<u32>) -> u32 {
    *m.lock().unwrap()
}

#[traced_async]
async fn serve(flag: bool) {
    loop {
        if flag {
            futures::pending!()
        }
    }
}

fn main() {
    futures::executor::block_on(async {
        Session(String::new()).finish().await;
        assert_eq!(Session(String::new()).finish_mut("ab".into()).await, 2);
        assert_eq!(wild("x".into(), ("abc".into(), "d".into())).await, 3);
        let mut c = (1, 2);
        refs("a".into(), ("b".into(), 0), &mut c).await;
        assert_eq!(c, (2, 2));
        let pair = || Pair("ab".into(), "cde".into());
        assert_eq!(structs(pair(), pair(), [4, 5]).await, 9);
        assert_eq!(configured(7).await, 7);
        assert_eq!(one_expression(1).await, 2);
        assert_eq!(locked(Mutex::new(3)).await, 3);
    });
    drop(serve(true));
}
