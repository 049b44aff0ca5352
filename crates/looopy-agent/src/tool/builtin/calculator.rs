//! `calculator`: arithmetic with a small recursive-descent evaluator.
//!
//! Grammar (usual precedence; `^` binds tighter than unary minus and is right-associative,
//! so `-2^2` is `-4` and `2^3^2` is `512`):
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary (('*' | '/' | '%') unary)*
//! unary   := ('-' | '+') unary | power
//! power   := primary ('^' unary)?
//! primary := number | '(' expr ')'
//! number  := digits ['.' digits] [('e' | 'E') ['+' | '-'] digits]
//! ```
//!
//! Nesting is limited so hostile input cannot overflow the stack, and so is the length.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Number;

use crate::tool::{Tool, ToolContext};

/// Arguments of `calculator`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CalculatorArgs {
    /// An arithmetic expression using + - * / % ^, parentheses, unary minus and decimal
    /// numbers, e.g. "(2 + 3) * 4.5".
    pub expression: String,
}

/// Evaluates arithmetic expressions; answers with the number.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

impl Tool for Calculator {
    const NAME: &'static str = "calculator";
    type Args = CalculatorArgs;
    type Output = Number;
    type Error = CalcError;

    fn description(&self) -> String {
        "Evaluates an arithmetic expression (+, -, *, /, % remainder, ^ power, parentheses) \
         and returns the number."
            .into()
    }

    async fn call(&self, args: CalculatorArgs, _ctx: ToolContext) -> Result<Number, CalcError> {
        evaluate(&args.expression).and_then(to_json_number)
    }
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CalcError {
    #[error("syntax error at position {position}: {message}")]
    Syntax { position: usize, message: String },
    #[error("division by zero")]
    DivisionByZero,
    #[error("expression nested too deeply (limit {MAX_DEPTH})")]
    TooDeep,
    #[error("expression too long (limit {MAX_LEN} bytes)")]
    TooLong,
    #[error("result is not a finite number")]
    NotFinite,
}

/// Maximum nesting of parentheses, unary signs and powers.
pub const MAX_DEPTH: usize = 64;
/// Maximum expression length in bytes.
pub const MAX_LEN: usize = 4096;

/// Evaluates `expression` (see the module docs for the grammar).
pub fn evaluate(expression: &str) -> Result<f64, CalcError> {
    if expression.len() > MAX_LEN {
        return Err(CalcError::TooLong);
    }
    let mut parser = Parser {
        src: expression.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    parser.skip_ws();
    if parser.pos < parser.src.len() {
        return Err(parser.syntax("unexpected character"));
    }
    if value.is_finite() {
        // Normalise -0 to 0 so `-0` prints as `0`.
        Ok(if value == 0.0 { 0.0 } else { value })
    } else {
        Err(CalcError::NotFinite)
    }
}

/// Integral results print without a fractional part (`42`, not `42.0`).
fn to_json_number(value: f64) -> Result<Number, CalcError> {
    const EXACT_INT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() <= EXACT_INT {
        // In range and integral, so the conversion is exact.
        Ok(Number::from(value as i64))
    } else {
        Number::from_f64(value).ok_or(CalcError::NotFinite)
    }
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn syntax(&self, message: &str) -> CalcError {
        CalcError::Syntax {
            position: self.pos,
            message: message.to_string(),
        }
    }

    fn skip_ws(&mut self) {
        while self.src.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.src.get(self.pos).copied()
    }

    fn descend(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(CalcError::TooDeep)
        } else {
            Ok(())
        }
    }

    fn expr(&mut self) -> Result<f64, CalcError> {
        let mut value = self.term()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            let rhs = self.term()?;
            value = if op == b'+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, CalcError> {
        let mut value = self.unary()?;
        while let Some(op @ (b'*' | b'/' | b'%')) = self.peek() {
            self.pos += 1;
            let rhs = self.unary()?;
            value = match op {
                b'*' => value * rhs,
                _ if rhs == 0.0 => return Err(CalcError::DivisionByZero),
                b'/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, CalcError> {
        match self.peek() {
            Some(sign @ (b'-' | b'+')) => {
                self.pos += 1;
                self.descend()?;
                let value = self.unary()?;
                self.depth -= 1;
                Ok(if sign == b'-' { -value } else { value })
            }
            _ => self.power(),
        }
    }

    fn power(&mut self) -> Result<f64, CalcError> {
        let base = self.primary()?;
        if self.peek() == Some(b'^') {
            self.pos += 1;
            self.descend()?;
            let exponent = self.unary()?;
            self.depth -= 1;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<f64, CalcError> {
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                self.descend()?;
                let value = self.expr()?;
                if self.peek() != Some(b')') {
                    return Err(self.syntax("expected ')'"));
                }
                self.pos += 1;
                self.depth -= 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(_) => Err(self.syntax("expected a number or '('")),
            None => Err(self.syntax("unexpected end of expression")),
        }
    }

    fn number(&mut self) -> Result<f64, CalcError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.src.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - from
        };
        let mut count = digits(self);
        if self.src.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            count += digits(self);
        }
        if count == 0 {
            self.pos = start;
            return Err(self.syntax("expected digits"));
        }
        if matches!(self.src.get(self.pos), Some(b'e' | b'E')) {
            let mark = self.pos;
            self.pos += 1;
            if matches!(self.src.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                self.pos = mark;
                return Err(self.syntax("expected exponent digits"));
            }
        }
        // The slice holds only ASCII digits, '.', 'e' and signs.
        let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or_default();
        text.parse::<f64>().map_err(|_| CalcError::Syntax {
            position: start,
            message: format!("invalid number {text:?}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn show(expr: &str) -> String {
        match evaluate(expr).and_then(to_json_number) {
            Ok(n) => n.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn arithmetic_follows_usual_precedence() {
        for (expr, want) in [
            ("6*7", "42"),
            ("1 + 2 * 3", "7"),
            ("(1 + 2) * 3", "9"),
            ("2^3^2", "512"),
            ("-2^2", "-4"),
            ("2^-1", "0.5"),
            ("10 % 4", "2"),
            ("7 / 2", "3.5"),
            ("--3", "3"),
            ("+4", "4"),
            (".5 + 1.25", "1.75"),
            ("1e3 / 4", "250"),
            ("-(0)", "0"),
            (" 3 - 1 - 1 ", "1"),
            ("0.1 + 0.2", "0.30000000000000004"),
        ] {
            assert_eq!(show(expr), want, "{expr}");
        }
    }

    #[test]
    fn errors_are_typed_and_explained() {
        assert_eq!(evaluate("1/0"), Err(CalcError::DivisionByZero));
        assert_eq!(evaluate("1%0"), Err(CalcError::DivisionByZero));
        assert!(matches!(
            evaluate("1 +"),
            Err(CalcError::Syntax { position: 3, .. })
        ));
        assert!(matches!(evaluate("(1"), Err(CalcError::Syntax { .. })));
        assert!(matches!(
            evaluate("1 2"),
            Err(CalcError::Syntax { position: 2, .. })
        ));
        assert!(matches!(
            evaluate("abc"),
            Err(CalcError::Syntax { position: 0, .. })
        ));
        assert!(matches!(evaluate(""), Err(CalcError::Syntax { .. })));
        assert!(matches!(evaluate("1e"), Err(CalcError::Syntax { .. })));
        assert!(matches!(evaluate("."), Err(CalcError::Syntax { .. })));
        assert_eq!(evaluate("10^400"), Err(CalcError::NotFinite));
        assert_eq!(evaluate(&"(".repeat(100)), Err(CalcError::TooDeep));
        assert_eq!(evaluate(&"-".repeat(100)), Err(CalcError::TooDeep));
        assert_eq!(evaluate(&"1+".repeat(3000)), Err(CalcError::TooLong));
    }

    #[test]
    fn large_and_fractional_results_keep_their_form() {
        assert_eq!(show("2^53"), "9007199254740992");
        assert_eq!(show("2^60"), "1.152921504606847e+18");
        assert_eq!(show("-1.5"), "-1.5");
    }

    proptest! {
        #[test]
        fn never_panics_on_any_input(s in "[0-9+*/%^(). e-]{0,64}") {
            let _ = evaluate(&s);
        }

        #[test]
        fn integers_add_exactly(a in -1_000_000i64..1_000_000, b in -1_000_000i64..1_000_000) {
            let expr = format!("{a} + ({b})");
            prop_assert_eq!(show(&expr), (a + b).to_string());
        }

        #[test]
        fn whitespace_does_not_matter(a in 0u32..1000, b in 1u32..1000, ws in " {0,3}") {
            let tight = format!("{a}*{b}-{a}/{b}");
            let loose = format!("{ws}{a}{ws}*{ws}{b}{ws}-{ws}{a}{ws}/{ws}{b}{ws}");
            prop_assert_eq!(evaluate(&tight), evaluate(&loose));
        }
    }
}
