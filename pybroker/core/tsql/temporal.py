"""The date and time values of a T-SQL batch (DATETIME, DATETIME2(n), DATETIMEOFFSET(n), DATE,
TIME(n)) with SQL Server's rules: their ranges and precision, text to a date and time and
back (CAST, and CONVERT's styles 0/100, 101, 103, 112, 23, 108, 20/120, 21/121, 126 and
127), and DATEADD, DATEDIFF, DATEPART and DATENAME. No clock: the runner passes the
instance clock's time in (GETDATE() and the others, pybroker.core.tsql.expressions).

**Chosen where SQL Server differs**: Python keeps microseconds, so DATETIME2(7),
DATETIMEOFFSET(7) and TIME(7) hold six digits of the second and show a seventh 0; text
with seven digits is rounded to six. The language is us_english (month names, mdy order
of 'mm/dd/yyyy') and DATEFIRST 7 (weeks begin on Sunday), SQL Server's defaults.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone

from pybroker.core.tsql.error_numbers import TsqlValueError

DATE_TYPES = ("DATETIMEOFFSET", "DATETIME2", "DATETIME", "DATE", "TIME")  # precedence order
SCALED_TYPES = ("DATETIME2", "DATETIMEOFFSET", "TIME")  # take (n), 0 to 7, 7 by default
_BASE = datetime(1900, 1, 1)  # what a number converted to DATETIME counts days from
_MONTHS = [calendar.month_abbr[m] for m in range(13)]
_DATETIME_LOW = datetime(1753, 1, 1)
# The dateparts and the words that name them (DATEADD, DATEDIFF, DATEPART, DATENAME).
DATEPARTS = {
    "year": ("year", "yy", "yyyy"), "quarter": ("quarter", "qq", "q"),
    "month": ("month", "mm", "m"), "dayofyear": ("dayofyear", "dy", "y"),
    "day": ("day", "dd", "d"), "week": ("week", "wk", "ww"), "weekday": ("weekday", "dw", "w"),
    "hour": ("hour", "hh"), "minute": ("minute", "mi", "n"), "second": ("second", "ss", "s"),
    "millisecond": ("millisecond", "ms"), "microsecond": ("microsecond", "mcs"),
    "nanosecond": ("nanosecond", "ns"), "tzoffset": ("tzoffset", "tz"),
    "iso_week": ("iso_week", "isowk", "isoww"),
}  # fmt: skip
DATEPART_WORDS = {word: part for part, words in DATEPARTS.items() for word in words}
_DATE_STYLES = (0, 100, 101, 103, 112, 23, 108, 20, 120, 21, 121, 126, 127)


@dataclass(frozen=True, slots=True)
class Moment:
    """A date and time value: ``type`` one of DATE_TYPES, ``value`` a naive datetime
    (DATETIME, DATETIME2), an aware one (DATETIMEOFFSET), a date (DATE) or a time (TIME);
    ``scale`` the digits of the second DATETIME2, DATETIMEOFFSET and TIME keep."""

    type: str
    value: datetime | date | time
    scale: int = 7

    def __str__(self) -> str:
        return to_text(self, None, "")


def type_name(m: Moment) -> str:
    return m.type.lower()


# -- making values of a type ----------------------------------------------------------------


def make(value: datetime | date | time, type_: str, scale: int, where: str) -> Moment:
    """``value`` as ``type_`` keeps it (its precision, its range): a datetime for every type
    but DATE (a date) and TIME (a time)."""
    if type_ == "DATE":
        return Moment(type_, value if isinstance(value, date) and not isinstance(
            value, datetime) else value.date(), 0)  # type: ignore[union-attr]
    if type_ == "TIME":
        assert isinstance(value, time)
        moment = _rounded(datetime.combine(date(2000, 1, 1), value), scale, where)
        return Moment(type_, moment.time(), scale)
    assert isinstance(value, datetime)
    if type_ == "DATETIME":
        if value.tzinfo is not None:
            value = value.replace(tzinfo=None)
        value = _datetime_ticks(value, where)
        if value < _DATETIME_LOW:
            raise TsqlValueError(
                f"The conversion of a varchar data type to a datetime data type resulted in "
                f"an out-of-range value ({value.date()} is before 1753-01-01, at {where})",
                242)
        return Moment(type_, value, 3)
    if type_ == "DATETIME2":
        return Moment(type_, _rounded(value.replace(tzinfo=None), scale, where), scale)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return Moment(type_, _rounded(value, scale, where), scale)


def _rounded(value: datetime, scale: int, where: str) -> datetime:
    if scale >= 6:
        return value
    step = 10 ** (6 - scale)
    micro = value.microsecond
    kept = (micro + step // 2) // step * step
    try:
        return value.replace(microsecond=0) + timedelta(microseconds=kept)
    except OverflowError:
        raise _overflow("datetime2", where) from None


def _datetime_ticks(value: datetime, where: str) -> datetime:
    """DATETIME keeps three-hundredths of a second: .000, .003, .007 (rounded so)."""
    ms = round(value.microsecond / 1000 * 0.3) / 0.3  # whole ticks of 1/300 s, in ms
    try:
        return value.replace(microsecond=0) + timedelta(milliseconds=round(ms))
    except OverflowError:
        raise _overflow("datetime", where) from None


def _overflow(name: str, where: str) -> TsqlValueError:
    return TsqlValueError(
        f"Adding a value to a '{name}' column caused an overflow (at {where})", 517)


def convert_moment(m: Moment, type_: str, scale: int, where: str) -> Moment:
    """A date and time value as another date and time type (CAST among them)."""
    if m.type == type_ and m.scale == scale:
        return m
    value = m.value
    if type_ == "TIME":
        if m.type == "DATE":
            raise not_allowed("date", "time", where)
        return make(value if isinstance(value, time) else value.time(), type_, scale,
                    where)  # type: ignore[union-attr]
    if m.type == "TIME":
        if type_ == "DATE":
            raise not_allowed("time", "date", where)
        assert isinstance(value, time)
        value = datetime.combine(_BASE.date(), value)
    elif m.type == "DATE":
        assert isinstance(value, date)
        value = datetime.combine(value, time())  # type: ignore[arg-type]
    if m.type == "DATETIMEOFFSET" and type_ != "DATETIMEOFFSET":
        value = value.replace(tzinfo=None)  # type: ignore[union-attr]  # the local time kept
    return make(value, type_, scale, where)


def not_allowed(source: str, target: str, where: str) -> TsqlValueError:
    return TsqlValueError(
        f"Explicit conversion from data type {source} to {target} is not allowed (at "
        f"{where})", 529)


def from_days(days: float, where: str) -> Moment:
    """A number as DATETIME: days (and their fraction) from 1900-01-01."""
    try:
        return make(_BASE + timedelta(days=days), "DATETIME", 3, where)
    except OverflowError:
        raise _overflow("datetime", where) from None


def to_days(m: Moment) -> float:
    """DATETIME as a number: days from 1900-01-01 (CAST(d AS FLOAT))."""
    assert isinstance(m.value, datetime)
    return (m.value - _BASE) / timedelta(days=1)


# -- text ------------------------------------------------------------------------------------

_TIME = r"(\d{1,2}):(\d{2})(?::(\d{2})(?:[.:](\d{1,9}))?)?\s*([AaPp][Mm])?"
_OFFSET = r"\s*(Z|[+-]\d{1,2}:\d{2})?"
_ISO = re.compile(rf"(\d{{4}})-(\d{{1,2}})-(\d{{1,2}})(?:(?:T|\s+){_TIME})?{_OFFSET}")
_COMPACT = re.compile(rf"(\d{{4}})(\d{{2}})(\d{{2}})(?:\s+{_TIME})?{_OFFSET}")
_SLASHED = re.compile(rf"(\d{{1,2}})[/.-](\d{{1,2}})[/.-](\d{{4}})(?:\s+{_TIME})?{_OFFSET}")
_NAMED = re.compile(rf"([A-Za-z]{{3,9}})\s+(\d{{1,2}}),?\s+(\d{{4}})(?:\s+{_TIME})?{_OFFSET}")
_ONLY_TIME = re.compile(rf"{_TIME}{_OFFSET}")


def from_text(text: str, type_: str, scale: int, where: str, style: int | None = None
              ) -> Moment:
    """Text as a date and time type: ISO 8601 ('yyyy-mm-dd[Thh:mi[:ss[.f]]][Z|+hh:mm]'),
    'yyyymmdd [time]', 'mm/dd/yyyy [time]' ('dd/mm/yyyy' with style 103), 'Mon dd yyyy
    [time]', or a time alone; error 241 for any other text, as SQL Server's."""
    s = text.strip()
    parts: tuple[str | None, ...] | None = None
    for pattern in (_ISO, _COMPACT):
        found = pattern.fullmatch(s)
        if found:
            y, mo, d, *rest = found.groups()
            parts = (y, mo, d, *rest)
            break
    else:
        found = _SLASHED.fullmatch(s)
        if found:
            a, b, y, *rest = found.groups()
            mo, d = (b, a) if style == 103 else (a, b)
            parts = (y, mo, d, *rest)
        elif (found := _NAMED.fullmatch(s)) is not None:
            name, d, y, *rest = found.groups()
            month = _month(name)
            if month is not None:
                parts = (y, str(month), d, *rest)
        elif (found := _ONLY_TIME.fullmatch(s)) is not None:
            parts = ("1900", "1", "1", *found.groups())
    if parts is None:
        raise _bad_text(text, where)
    y, mo, d, hh, mi, ss, fraction, half, offset = parts
    try:
        hour = int(hh or 0)
        if half is not None:
            if not 1 <= hour <= 12:
                raise ValueError
            hour = hour % 12 + (12 if half.upper() == "PM" else 0)
        micro = round(int((fraction or "0").ljust(7, "0")[:7]) / 10)
        value = datetime(int(y or 0), int(mo or 0), int(d or 0), hour, int(mi or 0),
                         int(ss or 0)) + timedelta(microseconds=micro)
        if offset is not None:
            value = value.replace(tzinfo=_zone(offset))
    except ValueError:
        if type_ == "DATETIME":
            raise TsqlValueError(
                f"The conversion of a varchar data type to a datetime data type resulted in "
                f"an out-of-range value ({text.strip()[:40]!r} at {where})", 242) from None
        raise _bad_text(text, where) from None
    if type_ == "DATE":
        return make(value.date(), type_, 0, where)
    if type_ == "TIME":
        return make(value.time(), type_, scale, where)
    return make(value, type_, scale, where)


def _month(name: str) -> int | None:
    for number in range(1, 13):
        if name.lower() in (calendar.month_abbr[number].lower(),
                            calendar.month_name[number].lower()):
            return number
    return None


def _zone(offset: str) -> timezone:
    if offset.upper() == "Z":
        return UTC
    sign = -1 if offset[0] == "-" else 1
    hours, minutes = offset[1:].split(":")
    if int(hours) > 14 or int(minutes) > 59:
        raise ValueError(offset)
    return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes)))


def _bad_text(text: str, where: str) -> TsqlValueError:
    return TsqlValueError(
        f"Conversion failed when converting date and/or time from character string "
        f"({text.strip()[:40]!r} at {where})", 241)


def check_style(style: int, where: str) -> None:
    if style not in _DATE_STYLES:
        raise TsqlValueError(
            f"{style} is not a valid style number when converting from a date and time to a "
            f"character string (at {where}; pybroker has styles "
            f"{', '.join(map(str, _DATE_STYLES))})", 281)


def to_text(m: Moment, style: int | None, where: str) -> str:
    """A date and time value as text: CAST's (style None: 0 for DATETIME, ISO for the others)
    or CONVERT's ``style``."""
    if style is None:
        style = 0 if m.type == "DATETIME" else 121
    check_style(style, where)
    value = m.value
    day = value if isinstance(value, date) else None
    clock = value if isinstance(value, time) else (
        value.time() if isinstance(value, datetime) else None)
    if m.type == "DATETIMEOFFSET" and style == 127:
        assert isinstance(value, datetime)
        value = value.astimezone(UTC)
        day, clock = value, value.time()
    digits = 3 if m.type == "DATETIME" else m.scale
    if style in (0, 100):
        pieces = []
        if day is not None:
            pieces.append(f"{_MONTHS[day.month]} {day.day:>2} {day.year}")
        if clock is not None:
            hour = clock.hour % 12 or 12
            pieces.append(f"{hour:>2}:{clock.minute:02}{'PM' if clock.hour >= 12 else 'AM'}")
        return " ".join(pieces)
    iso_day = "" if day is None else f"{day.year:04}-{day.month:02}-{day.day:02}"
    if style in (101, 103, 112, 23):
        if day is None:
            return "1900-01-01" if style == 23 else {101: "01/01/1900", 103: "01/01/1900",
                                                    112: "19000101"}[style]
        return {101: f"{day.month:02}/{day.day:02}/{day.year:04}",
                103: f"{day.day:02}/{day.month:02}/{day.year:04}",
                112: f"{day.year:04}{day.month:02}{day.day:02}", 23: iso_day}[style]
    if m.type == "DATE":
        return iso_day  # the ISO styles of a date alone
    if clock is None:
        clock = time()
    seconds = f"{clock.hour:02}:{clock.minute:02}:{clock.second:02}"
    if style == 108:
        return seconds
    fraction = f"{clock.microsecond:06}0"[:digits]
    if style in (20, 120) or (
            style in (126, 127) and m.type == "DATETIME" and clock.microsecond == 0):
        fraction = ""
    shown = seconds + (f".{fraction}" if fraction else "")
    if m.type == "TIME" and style in (21, 121, 126, 127):
        return shown
    if day is None:
        iso_day = "1900-01-01"
    text = f"{iso_day}{'T' if style in (126, 127) else ' '}{shown}"
    if m.type == "DATETIMEOFFSET" and isinstance(m.value, datetime):
        if style == 127:
            return text + "Z"
        if style in (21, 121, 126):
            return text + ("" if style == 126 else " ") + _offset_text(m.value)
    return text


def _offset_text(value: datetime) -> str:
    offset = value.utcoffset() or timedelta()
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02}:{abs(minutes) % 60:02}"


# -- DATEADD, DATEDIFF, DATEPART, DATENAME -----------------------------------------------------

_UNIT = {"hour": timedelta(hours=1), "minute": timedelta(minutes=1),
         "second": timedelta(seconds=1), "millisecond": timedelta(milliseconds=1),
         "microsecond": timedelta(microseconds=1)}


def _not_for(part: str, function: str, m: Moment, where: str) -> TsqlValueError:
    return TsqlValueError(
        f"The datepart {part} is not supported by date function {function} for data type "
        f"{type_name(m)} (at {where})", 9810)


def dateadd(part: str, number: int, m: Moment, where: str) -> Moment:
    """DATEADD(part, number, m): the same type; a month's end is kept (Jan 31 + 1 month is
    Feb 28 or 29); error 517 past the type's range."""
    value = m.value
    if m.type == "TIME":
        if part not in _UNIT and part != "nanosecond":
            raise _not_for(part, "dateadd", m, where)
        assert isinstance(value, time)
        value = datetime.combine(_BASE.date(), value)
    elif m.type == "DATE":
        if part in _UNIT or part == "nanosecond":
            raise _not_for(part, "dateadd", m, where)
        assert isinstance(value, date)
        value = datetime.combine(value, time())  # type: ignore[arg-type]
    if part in ("tzoffset", "iso_week"):
        raise _not_for(part, "dateadd", m, where)
    assert isinstance(value, datetime)
    try:
        if part in ("year", "quarter", "month"):
            months = number * {"year": 12, "quarter": 3, "month": 1}[part]
            total = value.year * 12 + value.month - 1 + months
            year, month = divmod(total, 12)
            last = calendar.monthrange(year, month + 1)[1] if 1 <= year <= 9999 else 31
            value = value.replace(year=year, month=month + 1, day=min(value.day, last))
        elif part in ("day", "dayofyear", "weekday"):
            value = value + timedelta(days=number)
        elif part == "week":
            value = value + timedelta(weeks=number)
        elif part == "nanosecond":
            value = value + timedelta(microseconds=round(number / 1000))
        else:
            value = value + _UNIT[part] * number
    except (OverflowError, ValueError):
        raise _overflow(type_name(m), where) from None
    if m.type == "DATETIME" and value < _DATETIME_LOW:
        raise _overflow("datetime", where)
    if m.type == "TIME":
        return make(value.time(), "TIME", m.scale, where)
    if m.type == "DATE":
        return make(value.date(), "DATE", 0, where)
    return make(value, m.type, m.scale, where)


def _as_datetime(m: Moment) -> datetime:
    value = m.value
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if (
            value.tzinfo is not None) else value
    if isinstance(value, time):
        return datetime.combine(_BASE.date(), value)
    return datetime.combine(value, time())


def datediff(part: str, start: Moment, end: Moment, where: str) -> int:
    """DATEDIFF(part, start, end): how many boundaries of ``part`` lie between them (so
    DATEDIFF(year, '2020-12-31', '2021-01-01') is 1), DATETIMEOFFSETs compared in UTC;
    error 535 past INT."""
    if part in ("tzoffset",):
        raise _not_for(part, "datediff", start, where)
    a, b = _as_datetime(start), _as_datetime(end)
    if part == "year":
        n = b.year - a.year
    elif part == "quarter":
        n = (b.year * 4 + (b.month - 1) // 3) - (a.year * 4 + (a.month - 1) // 3)
    elif part == "month":
        n = (b.year * 12 + b.month) - (a.year * 12 + a.month)
    elif part in ("day", "dayofyear", "weekday"):
        n = (b.date() - a.date()).days
    elif part in ("week", "iso_week"):
        # Weeks begin on Sunday (DATEFIRST 7): count the Sundays crossed.
        n = ((b.date() - _BASE.date()).days + 1) // 7 - ((a.date() - _BASE.date()).days + 1) // 7
    else:
        unit = _UNIT.get(part, timedelta(microseconds=1))
        n = _units(b, unit) - _units(a, unit)
        if part == "nanosecond":
            n *= 1000
    if not -(2**31) <= n <= 2**31 - 1:
        raise TsqlValueError(
            f"The datediff function resulted in an overflow. The number of dateparts "
            f"separating two date/time instances is too large. Try to use datediff with a "
            f"less precise datepart (at {where})", 535)
    return n


def _units(value: datetime, unit: timedelta) -> int:
    return (value - datetime(1, 1, 1)) // unit


def datepart(part: str, m: Moment, where: str) -> int:
    """DATEPART(part, m) as an integer."""
    value = m.value
    has_date = not isinstance(value, time)
    has_time = m.type != "DATE"
    if part in ("hour", "minute", "second", "millisecond", "microsecond", "nanosecond"):
        if not has_time:
            raise _not_for(part, "datepart", m, where)
        clock = value if isinstance(value, time) else value.time()  # type: ignore[union-attr]
        return {"hour": clock.hour, "minute": clock.minute, "second": clock.second,
                "millisecond": clock.microsecond // 1000,
                "microsecond": clock.microsecond,
                "nanosecond": clock.microsecond * 1000}[part]
    if part == "tzoffset":
        if m.type != "DATETIMEOFFSET":
            raise _not_for(part, "datepart", m, where)
        assert isinstance(value, datetime)
        return int((value.utcoffset() or timedelta()).total_seconds() // 60)
    if not has_date:
        raise _not_for(part, "datepart", m, where)
    day = value if not isinstance(value, datetime) else value.date()
    assert isinstance(day, date)
    if part == "iso_week":
        return day.isocalendar()[1]
    sunday_first = (day.weekday() + 1) % 7 + 1  # Sunday 1 ... Saturday 7
    if part == "week":
        first = date(day.year, 1, 1)
        return ((day - first).days + (first.weekday() + 1) % 7) // 7 + 1
    return {"year": day.year, "quarter": (day.month - 1) // 3 + 1, "month": day.month,
            "dayofyear": day.timetuple().tm_yday, "day": day.day,
            "weekday": sunday_first}[part]


def datename(part: str, m: Moment, where: str) -> str:
    """DATENAME(part, m): the month's and the weekday's names, the other parts' numbers."""
    number = datepart(part, m, where)
    if part == "month":
        return calendar.month_name[number]
    if part == "weekday":
        return calendar.day_name[(number + 5) % 7]
    if part == "tzoffset":
        assert isinstance(m.value, datetime)
        return _offset_text(m.value)
    return str(number)


def now_as(type_: str, epoch: float) -> Moment:
    """The instance clock's time (epoch seconds) as GETDATE() (DATETIME, local),
    GETUTCDATE() (DATETIME, UTC), SYSDATETIME() (DATETIME2, local), SYSUTCDATETIME()
    (DATETIME2, UTC) and SYSDATETIMEOFFSET() give it."""
    utc = datetime.fromtimestamp(epoch, UTC)
    local = utc.astimezone()
    kind, value = {
        "GETDATE": ("DATETIME", local.replace(tzinfo=None)),
        "GETUTCDATE": ("DATETIME", utc.replace(tzinfo=None)),
        "SYSDATETIME": ("DATETIME2", local.replace(tzinfo=None)),
        "SYSUTCDATETIME": ("DATETIME2", utc.replace(tzinfo=None)),
        "SYSDATETIMEOFFSET": ("DATETIMEOFFSET", local),
    }[type_]
    return make(value, kind, 7, "")
