//! Lengths of time, times of day and large numbers as a text writes
//! them: "3 months" is about "90 days", "9 a.m." is "09:00", "200
//! thousand" is "200k".

use super::Tokens;
use super::identifiers::{number_key, number_text};
use crate::normalize::{alias, number_word, stem};

/// A length of time as a text writes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WrittenDuration {
    /// The number's key ("3", "90"); `None` for "a" or "an".
    pub(crate) number: Option<String>,
    /// The unit's stem when written as a word of its own ("month").
    pub(crate) unit: Option<String>,
    /// The length, in seconds.
    pub(crate) seconds: f64,
}

/// The most durations a text keeps: a text of the model's 4 KB could
/// write hundreds, and the comparison matches every pair.
const DURATIONS_KEPT: usize = 16;

impl Tokens {
    /// Keeps the duration that a number (`number`, its key; `None` for
    /// "a"/"an") written as `token` makes with its unit: a suffix of the
    /// token ("30s", "24h", "15min") or the next word ("3 months").
    pub(crate) fn add_duration(&mut self, number: Option<&str>, token: &str, next: &str) {
        if self.durations.len() >= DURATIONS_KEPT {
            return;
        }
        let count = number.map_or(Some(1.0), |key| key.parse::<f64>().ok());
        let Some(count) = count else { return };
        let suffix = token.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ',');
        let (unit, seconds) = match suffix_seconds(suffix) {
            Some(seconds) if number.is_some() => (None, seconds),
            _ => {
                let next = next.to_lowercase();
                let unit = alias(&next);
                let Some(seconds) = unit_seconds(unit) else {
                    return;
                };
                (Some(stem(unit).into_owned()), seconds)
            }
        };
        self.durations.push(WrittenDuration {
            number: number.map(str::to_owned),
            unit,
            seconds: count * seconds,
        });
    }
}

/// The seconds of a unit of time written as a word ("months", "day").
fn unit_seconds(word: &str) -> Option<f64> {
    const DAY: f64 = 86_400.0;
    Some(match word {
        "second" | "seconds" => 1.0,
        "minute" | "minutes" => 60.0,
        "hour" | "hours" => 3_600.0,
        "day" | "days" => DAY,
        "week" | "weeks" => 7.0 * DAY,
        // The mean month and year of the Gregorian calendar: "3 months"
        // is about 90 days, "12 months" a year.
        "month" | "months" => 30.436_875 * DAY,
        "year" | "years" => 365.242_5 * DAY,
        _ => return None,
    })
}

/// The seconds of a unit written after a number's digits ("30s", "24h",
/// "15min", "2hrs", "3d"). A lowercase "m" is minutes, as in
/// [`number_key`].
fn suffix_seconds(suffix: &str) -> Option<f64> {
    match suffix {
        "s" | "sec" | "secs" => Some(1.0),
        "m" | "min" | "mins" => Some(60.0),
        "h" | "hr" | "hrs" => Some(3_600.0),
        "d" => Some(86_400.0),
        _ => None,
    }
}

/// Whether two durations are the same length: within 3%, so that "3
/// months" is "90 days" and "52 weeks" a year.
pub(crate) fn same_length(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.03 * a.max(b)
}

/// A time of day written as "H:MM" on a 24-hour clock ("09:00" is
/// "9:00", "9:30pm" is "21:30"), with whether it took `next` too ("9"
/// before "a.m."). A number alone is no time; one before "am"/"pm", or
/// with a colon and two digits, is.
pub(crate) fn time_of_day(token: &str, next: &str) -> Option<(String, bool)> {
    let meridiem = |text: &str| -> Option<bool> {
        match text.to_ascii_lowercase().trim_end_matches('.') {
            "am" | "a.m" => Some(false),
            "pm" | "p.m" => Some(true),
            _ => None,
        }
    };
    if !token.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let digits_end = token
        .find(|c: char| !(c.is_ascii_digit() || c == ':'))
        .unwrap_or(token.len());
    let (clock, suffix) = token.split_at(digits_end);
    let (pm, with_next) = if suffix.is_empty() {
        match meridiem(next) {
            Some(pm) => (Some(pm), true),
            None => (None, false),
        }
    } else {
        (Some(meridiem(suffix)?), false)
    };
    let (hour, minute) = match clock.split_once(':') {
        Some((hour, minute)) if minute.len() == 2 => (hour, minute.parse::<u32>().ok()?),
        Some(_) => return None,
        None if pm.is_some() => (clock, 0),
        None => return None,
    };
    let hour: u32 = hour.parse().ok()?;
    if hour > 23 || minute > 59 {
        return None;
    }
    let hour = match pm {
        Some(_) if !(1..=12).contains(&hour) => return None,
        Some(pm) => hour % 12 + if pm { 12 } else { 0 },
        None => hour,
    };
    Some((format!("{hour}:{minute:02}"), with_next))
}

/// The number `token` and `next` write together when `next` is
/// "thousand", "million" or "billion" ("200 thousand" is 200000).
pub(crate) fn times_a_large_number(token: &str, next: &str) -> Option<String> {
    let times = [("thousand", 1e3), ("million", 1e6), ("billion", 1e9)]
        .into_iter()
        .find(|(word, _)| next.eq_ignore_ascii_case(word))?
        .1;
    // "ten thousand" is 10000 too.
    let token = number_word(&token.to_lowercase()).unwrap_or(token);
    if !token.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let number: f64 = token.replace(',', "").parse().ok()?;
    Some(number_text(number * times))
}

/// Whether `next` after a number makes it a percentage written out ("60
/// percent" is "60%").
pub(crate) fn percent_written_out(token: &str, next: &str) -> bool {
    next.eq_ignore_ascii_case("percent") && number_key(token).is_some()
}

/// Whether `word` (before `next`) says how often something happens,
/// not what: "keep"/"keeps" before a gerund ("keeps restarting"),
/// "repeated", "repeatedly", "constantly", "continually".
pub(crate) fn is_how_often(word: &str, next: &str) -> bool {
    // Compared without lowercasing: this runs for every word of a text.
    let is = |words: &[&str]| words.iter().any(|w| word.eq_ignore_ascii_case(w));
    if is(&["keep", "keeps", "kept"]) {
        let gerund = next.len() > 4
            && next
                .get(next.len() - 3..)
                .is_some_and(|end| end.eq_ignore_ascii_case("ing"));
        return gerund;
    }
    is(&[
        "repeated",
        "repeatedly",
        "constantly",
        "continually",
        "continuously",
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_of_day_is_read_on_a_24_hour_clock() {
        assert_eq!(time_of_day("7", "a.m."), Some(("7:00".to_owned(), true)));
        assert_eq!(time_of_day("8:15pm", ""), Some(("20:15".to_owned(), false)));
        assert_eq!(time_of_day("12", "AM"), Some(("0:00".to_owned(), true)));
        assert_eq!(time_of_day("7", "GMT"), None);
        assert_eq!(time_of_day("4:5", ""), None);
        assert_eq!(time_of_day("26:00", ""), None);
    }

    #[test]
    fn durations_of_one_length_are_the_same_within_three_percent() {
        assert!(same_length(3.0 * 30.436_875, 90.0));
        assert!(!same_length(3.0 * 30.436_875, 30.0));
    }
}
