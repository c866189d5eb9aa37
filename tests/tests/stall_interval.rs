//! The stall watchdog's check interval: below `MIN_INTERVAL` it would keep
//! a core busy (at zero, a loop with no pause), so `spawn` refuses it.

use std::io::ErrorKind;
use std::time::Duration;

use async_stack::stall::{MIN_INTERVAL, Watchdog};

#[test]
fn an_interval_below_the_minimum_is_refused_with_its_value() {
    assert_eq!(MIN_INTERVAL, Duration::from_millis(1));
    for (interval, shown) in [
        (Duration::ZERO, "0ns"),
        (Duration::from_nanos(1), "1ns"),
        (Duration::from_micros(999), "999µs"),
    ] {
        let err = Watchdog::builder()
            .interval(interval)
            .spawn()
            .expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            format!(
                "stall check interval {shown} is below the minimum of 1ms \
                 (async_stack::stall::MIN_INTERVAL)"
            )
        );
    }
}

#[test]
fn the_minimum_itself_is_accepted() {
    let watchdog = Watchdog::builder()
        .interval(MIN_INTERVAL)
        .on_stall(|_| {})
        .spawn()
        .expect("1 ms is allowed");
    watchdog.stop();
}
