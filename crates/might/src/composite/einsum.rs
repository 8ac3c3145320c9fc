//! `torch.einsum`: Einstein summation over any number of operands.
//!
//! The equation is parsed into integer labels (`A`-`Z`, `a`-`z`, then one label per
//! broadcast dimension of `...`, right-aligned across operands as in broadcasting). Each
//! operand first loses its repeated labels (a diagonal, taken with `index_select` on the
//! flattened repeated dims) and every label no other operand nor the output needs (a sum);
//! the operands are then contracted left to right, each pair as one batched `matmul` after a
//! permute and reshape to `[batch, left, contracted] @ [batch, contracted, right]`. Labels of
//! size 1 broadcast against the same label of another operand. Everything is built from
//! differentiable primitives, so the backward is automatic.

use crate::{DType, Error, Result, Tensor};

/// Labels 0..52 are the letters (in ASCII order, which is also the implicit output order);
/// the broadcast dims of `...` follow.
const ELLIPSIS_BASE: usize = 52;
const OP: &str = "einsum";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Token {
    Label(usize),
    Ellipsis,
}

fn letter(c: char) -> Option<usize> {
    match c {
        'A'..='Z' => Some(c as usize - 'A' as usize),
        'a'..='z' => Some(26 + c as usize - 'a' as usize),
        _ => None,
    }
}

fn label_name(l: usize) -> String {
    match l {
        0..=25 => ((b'A' + l as u8) as char).to_string(),
        26..=51 => ((b'a' + (l - 26) as u8) as char).to_string(),
        _ => "...".to_string(),
    }
}

/// One subscript term (`ij`, `...k`) as tokens; at most one ellipsis.
#[track_caller]
fn parse_term(term: &str) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let chars: Vec<char> = term.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '.' {
            if chars.get(i..i + 3) != Some(&['.', '.', '.'][..]) {
                return Err(Error::invalid(
                    OP,
                    format!("'.' must come as an ellipsis '...' in subscript '{term}'"),
                ));
            }
            if out.contains(&Token::Ellipsis) {
                return Err(Error::invalid(
                    OP,
                    format!("more than one ellipsis in subscript '{term}'"),
                ));
            }
            out.push(Token::Ellipsis);
            i += 3;
            continue;
        }
        let Some(l) = letter(c) else {
            return Err(Error::invalid(
                OP,
                format!("invalid subscript '{c}' in '{term}': only letters A-Z, a-z and '...'"),
            ));
        };
        out.push(Token::Label(l));
        i += 1;
    }
    Ok(out)
}

/// The number of letters of a term and whether it has an ellipsis.
fn letters(term: &[Token]) -> usize {
    term.iter().filter(|t| matches!(t, Token::Label(_))).count()
}

/// A term's tokens as labels, the ellipsis expanded to its `n_ell` dims right-aligned among
/// `max_ell`.
fn expand(term: &[Token], n_ell: usize, max_ell: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for t in term {
        match t {
            Token::Label(l) => out.push(*l),
            Token::Ellipsis => out.extend((max_ell - n_ell..max_ell).map(|k| ELLIPSIS_BASE + k)),
        }
    }
    out
}

/// Where label `l` sits among `labels` (always present by construction; an error, not a
/// panic, if that ever breaks).
fn position(labels: &[usize], l: usize) -> Result<isize> {
    labels
        .iter()
        .position(|&x| x == l)
        .map(|i| i as isize)
        .ok_or_else(|| Error::invalid(OP, format!("internal: label {} lost", label_name(l))))
}

/// An operand with its labels, one per dim.
struct Labelled {
    t: Tensor,
    labels: Vec<usize>,
}

impl Labelled {
    /// Take the diagonal of every repeated label, leaving each label once (at the end).
    fn diagonalize(mut self) -> Result<Labelled> {
        while let Some(l) = self
            .labels
            .iter()
            .copied()
            .find(|l| self.labels.iter().filter(|x| *x == l).count() > 1)
        {
            let rep: Vec<usize> = (0..self.labels.len())
                .filter(|&i| self.labels[i] == l)
                .collect();
            let rest: Vec<usize> = (0..self.labels.len())
                .filter(|&i| self.labels[i] != l)
                .collect();
            let n = self.t.dims()[rep[0]];
            let perm: Vec<isize> = rest.iter().chain(&rep).map(|&i| i as isize).collect();
            let mut shape: Vec<usize> = rest.iter().map(|&i| self.t.dims()[i]).collect();
            let k = rep.len() as u32;
            shape.push(n.pow(k));
            // element (i, i, .., i) of the k flattened dims sits at i · (n^{k-1} + .. + 1)
            let step: usize = (0..k).map(|j| n.pow(j)).sum();
            let idx: Vec<i64> = (0..n).map(|i| (i * step) as i64).collect();
            let idx = Tensor::from_vec(idx, [n])?.to_device(self.t.device())?;
            let t = self
                .t
                .permute(&perm)?
                .reshape(shape)?
                .index_select(-1, &idx)?;
            let mut labels: Vec<usize> = rest.iter().map(|&i| self.labels[i]).collect();
            labels.push(l);
            self = Labelled { t, labels };
        }
        Ok(self)
    }

    /// Sum away every label `keep` rejects.
    fn sum_out(self, keep: impl Fn(usize) -> bool) -> Result<Labelled> {
        let dims: Vec<isize> = (0..self.labels.len())
            .filter(|&i| !keep(self.labels[i]))
            .map(|i| i as isize)
            .collect();
        if dims.is_empty() {
            return Ok(self);
        }
        let labels = self.labels.iter().copied().filter(|&l| keep(l)).collect();
        Ok(Labelled {
            t: self.t.sum_dims(&dims, false)?,
            labels,
        })
    }

    /// Permute to `order` (labels), broadcasting each to `sizes[label]` and reshaping into
    /// the groups `split` (numbers of consecutive labels merged into one dim).
    fn arrange(&self, order: &[usize], sizes: &[usize], split: &[usize]) -> Result<Tensor> {
        let perm: Vec<isize> = order
            .iter()
            .map(|&l| position(&self.labels, l))
            .collect::<Result<_>>()?;
        let full: Vec<usize> = order.iter().map(|&l| sizes[l]).collect();
        let t = self.t.permute(&perm)?.expand(full.clone())?;
        let mut shape = Vec::new();
        let mut at = 0;
        for &n in split {
            shape.push(full[at..at + n].iter().product());
            at += n;
        }
        t.reshape(shape)
    }
}

/// Contract `a` and `b`, keeping the labels `keep` accepts (those needed by the output or a
/// later operand), as one batched matmul.
fn contract(a: Labelled, b: Labelled, keep: &dyn Fn(usize) -> bool) -> Result<Labelled> {
    let (la, lb) = (a.labels.clone(), b.labels.clone());
    let a = a.sum_out(|l| keep(l) || lb.contains(&l))?;
    let b = b.sum_out(|l| keep(l) || la.contains(&l))?;
    let top = la.iter().chain(&lb).copied().max().unwrap_or(0);
    // a label's size, a 1 giving way to the other operand's (which may be 0)
    let mut sizes: Vec<Option<usize>> = vec![None; top + 1];
    for x in [&a, &b] {
        for (i, &l) in x.labels.iter().enumerate() {
            if sizes[l].is_none_or(|m| m == 1) {
                sizes[l] = Some(x.t.dims()[i]);
            }
        }
    }
    let sizes: Vec<usize> = sizes.into_iter().map(|s| s.unwrap_or(1)).collect();
    let in_b = |l: &usize| b.labels.contains(l);
    let batch: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && keep(*l))
        .collect();
    let summed: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && !keep(*l))
        .collect();
    let left: Vec<usize> = a.labels.iter().copied().filter(|l| !in_b(l)).collect();
    let right: Vec<usize> = b
        .labels
        .iter()
        .copied()
        .filter(|l| !la.contains(l))
        .collect();
    let a_order: Vec<usize> = batch.iter().chain(&left).chain(&summed).copied().collect();
    let b_order: Vec<usize> = batch.iter().chain(&summed).chain(&right).copied().collect();
    let at = a.arrange(&a_order, &sizes, &[batch.len(), left.len(), summed.len()])?;
    let bt = b.arrange(&b_order, &sizes, &[batch.len(), summed.len(), right.len()])?;
    let labels: Vec<usize> = batch.iter().chain(&left).chain(&right).copied().collect();
    let shape: Vec<usize> = labels.iter().map(|&l| sizes[l]).collect();
    Ok(Labelled {
        t: at.matmul(&bt)?.reshape(shape)?,
        labels,
    })
}

impl Tensor {
    /// Einstein summation (`torch.einsum`): `Tensor::einsum("ij,jk->ik", &[&a, &b])`.
    ///
    /// Subscripts are letters; `...` stands for broadcast dims. Without `->` the output is
    /// the broadcast dims followed by the letters used exactly once, in ASCII order. A letter
    /// repeated within one operand takes its diagonal (`"ii->i"`, trace `"ii"`); a letter
    /// missing from the output is summed; sizes of a letter shared by operands must agree or
    /// be 1. Broadcast dims left out of an explicit output are summed, as in PyTorch.
    #[track_caller]
    pub fn einsum(equation: &str, operands: &[&Tensor]) -> Result<Tensor> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let terms = lhs.split(',').map(parse_term).collect::<Result<Vec<_>>>()?;
        if terms.len() != operands.len() {
            return Err(Error::invalid(
                OP,
                format!(
                    "equation '{equation}' has {} operand subscripts but {} operands were given",
                    terms.len(),
                    operands.len()
                ),
            ));
        }
        let first = operands[0];
        let shapes: Vec<String> = operands.iter().map(|t| t.shape().to_string()).collect();
        let shapes = shapes.join(", ");
        for t in operands {
            first.check_same_dtype(OP, t)?;
            if t.device() != first.device() {
                return Err(Error::invalid(OP, "operands are on different devices"));
            }
        }
        if first.dtype() == DType::Bool {
            return Err(Error::dtype(OP, "bool operands are not supported"));
        }
        // the dims each ellipsis stands for
        let mut n_ell = Vec::new();
        for (i, (term, t)) in terms.iter().zip(operands).enumerate() {
            let nl = letters(term);
            let has_ell = term.contains(&Token::Ellipsis);
            if (has_ell && t.rank() < nl) || (!has_ell && t.rank() != nl) {
                return Err(Error::shape(
                    OP,
                    format!(
                        "operand {i} has {} dims but its subscript in '{equation}' names {nl}{} \
                         (operands {shapes})",
                        t.rank(),
                        if has_ell { " and an ellipsis" } else { "" }
                    ),
                ));
            }
            n_ell.push(t.rank() - nl);
        }
        let max_ell = n_ell.iter().copied().max().unwrap_or(0);
        let inputs: Vec<Vec<usize>> = terms
            .iter()
            .zip(&n_ell)
            .map(|(t, &n)| expand(t, n, max_ell))
            .collect();
        // the sizes each label takes must agree, or be 1 between operands
        let mut size: Vec<Option<usize>> = vec![None; ELLIPSIS_BASE + max_ell];
        for (i, (labels, t)) in inputs.iter().zip(operands).enumerate() {
            for (j, &l) in labels.iter().enumerate() {
                let n = t.dims()[j];
                let own = labels.iter().zip(t.dims()).find(|(x, _)| **x == l);
                if own.is_some_and(|(_, &m)| m != n) {
                    return Err(Error::shape(
                        OP,
                        format!(
                            "subscript {} is repeated for operand {i} but the sizes differ \
                             (operands {shapes})",
                            label_name(l)
                        ),
                    ));
                }
                size[l] = match size[l] {
                    Some(m) if m != n && m != 1 && n != 1 => {
                        return Err(Error::shape(
                            OP,
                            format!(
                                "subscript {} has size {n} for operand {i}, which does not \
                                 broadcast with {m} (equation '{equation}', operands {shapes})",
                                label_name(l)
                            ),
                        ))
                    }
                    Some(m) if m != 1 => Some(m),
                    _ => Some(n),
                };
            }
        }
        let output = match rhs {
            Some(r) => {
                let term = parse_term(r)?;
                let mut out = Vec::new();
                for t in &term {
                    match *t {
                        Token::Label(l) => {
                            if out.contains(&l) {
                                return Err(Error::invalid(
                                    OP,
                                    format!(
                                        "output subscript {} appears more than once",
                                        label_name(l)
                                    ),
                                ));
                            }
                            if size[l].is_none() {
                                return Err(Error::invalid(
                                    OP,
                                    format!(
                                        "output subscript {} does not appear in any input \
                                         of '{equation}'",
                                        label_name(l)
                                    ),
                                ));
                            }
                            out.push(l);
                        }
                        Token::Ellipsis => out.extend((0..max_ell).map(|k| ELLIPSIS_BASE + k)),
                    }
                }
                out
            }
            None => {
                let mut out: Vec<usize> = (0..max_ell).map(|k| ELLIPSIS_BASE + k).collect();
                for l in 0..ELLIPSIS_BASE {
                    if inputs.iter().flatten().filter(|&&x| x == l).count() == 1 {
                        out.push(l);
                    }
                }
                out
            }
        };

        let mut rest = inputs
            .into_iter()
            .zip(operands)
            .map(|(labels, t)| {
                Labelled {
                    t: (*t).clone(),
                    labels,
                }
                .diagonalize()
            })
            .collect::<Result<Vec<_>>>()?;
        // labels still needed after the first k operands have been folded in
        let needed_after = |rest: &[Labelled]| -> Vec<usize> {
            rest.iter().flat_map(|x| x.labels.iter().copied()).collect()
        };
        let mut acc = rest.remove(0);
        while !rest.is_empty() {
            let b = rest.remove(0);
            let later = needed_after(&rest);
            let keep = |l: usize| output.contains(&l) || later.contains(&l);
            acc = contract(acc, b, &keep)?;
        }
        let acc = acc.sum_out(|l| output.contains(&l))?;
        let perm: Vec<isize> = output
            .iter()
            .map(|&l| position(&acc.labels, l))
            .collect::<Result<_>>()?;
        acc.t.permute(&perm)
    }
}
