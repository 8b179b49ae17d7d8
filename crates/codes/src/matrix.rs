//! Small dense matrices over GF(2^8): inversion, rank and linear solves by Gaussian
//! elimination. Sizes are at most a few hundred, so clarity beats speed here.

use kintsugi_gf::{inv, mul};

/// Row-major matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<u8>,
}

impl Matrix {
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Matrix { rows, cols, data: vec![0; rows * cols] }
    }

    pub fn identity(n: usize) -> Self {
        let mut m = Matrix::zeros(n, n);
        for i in 0..n {
            m.data[i * n + i] = 1;
        }
        m
    }

    pub fn from_rows(rows: &[&[u8]]) -> Self {
        let cols = rows.first().map_or(0, |r| r.len());
        let mut data = Vec::with_capacity(rows.len() * cols);
        for r in rows {
            assert_eq!(r.len(), cols, "ragged rows");
            data.extend_from_slice(r);
        }
        Matrix { rows: rows.len(), cols, data }
    }

    pub fn row(&self, r: usize) -> &[u8] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }

    pub fn get(&self, r: usize, c: usize) -> u8 {
        self.data[r * self.cols + c]
    }

    pub fn set(&mut self, r: usize, c: usize, v: u8) {
        self.data[r * self.cols + c] = v;
    }

    /// self x other.
    pub fn mul(&self, other: &Matrix) -> Matrix {
        assert_eq!(self.cols, other.rows);
        let mut out = Matrix::zeros(self.rows, other.cols);
        for r in 0..self.rows {
            for i in 0..self.cols {
                let a = self.get(r, i);
                if a == 0 {
                    continue;
                }
                for c in 0..other.cols {
                    out.data[r * other.cols + c] ^= mul(a, other.get(i, c));
                }
            }
        }
        out
    }

    /// Row vector v (len = rows) times self.
    pub fn left_mul_vec(&self, v: &[u8]) -> Vec<u8> {
        assert_eq!(v.len(), self.rows);
        let mut out = vec![0u8; self.cols];
        for (r, &a) in v.iter().enumerate() {
            if a != 0 {
                for (o, &x) in out.iter_mut().zip(self.row(r)) {
                    *o ^= mul(a, x);
                }
            }
        }
        out
    }

    /// Inverse of a square matrix, or `None` if singular.
    pub fn invert(&self) -> Option<Matrix> {
        assert_eq!(self.rows, self.cols, "only square matrices invert");
        let n = self.rows;
        let mut a = self.clone();
        let mut b = Matrix::identity(n);
        for col in 0..n {
            let pivot = (col..n).find(|&r| a.get(r, col) != 0)?;
            a.swap_rows(col, pivot);
            b.swap_rows(col, pivot);
            let p = inv(a.get(col, col)).expect("pivot is nonzero");
            a.scale_row(col, p);
            b.scale_row(col, p);
            for r in 0..n {
                let f = a.get(r, col);
                if r != col && f != 0 {
                    a.add_row_multiple(r, col, f);
                    b.add_row_multiple(r, col, f);
                }
            }
        }
        Some(b)
    }

    fn swap_rows(&mut self, a: usize, b: usize) {
        if a != b {
            for c in 0..self.cols {
                self.data.swap(a * self.cols + c, b * self.cols + c);
            }
        }
    }

    fn scale_row(&mut self, r: usize, f: u8) {
        for x in &mut self.data[r * self.cols..(r + 1) * self.cols] {
            *x = mul(*x, f);
        }
    }

    /// row[dst] ^= f * row[src]
    fn add_row_multiple(&mut self, dst: usize, src: usize, f: u8) {
        for c in 0..self.cols {
            let v = mul(f, self.get(src, c));
            self.data[dst * self.cols + c] ^= v;
        }
    }
}

/// Indices (into `rows`, kept in the given order of preference) of a maximal set of
/// linearly independent rows, chosen greedily: a row is taken when it adds to the rank.
pub fn independent_rows(rows: &[&[u8]]) -> Vec<usize> {
    let cols = rows.first().map_or(0, |r| r.len());
    // Reduced basis kept in echelon form: (pivot column, row).
    let mut basis: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut chosen = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if basis.len() == cols {
            break;
        }
        let mut v = r.to_vec();
        for (p, b) in &basis {
            let f = v[*p];
            if f != 0 {
                for (x, y) in v.iter_mut().zip(b) {
                    *x ^= mul(f, *y);
                }
            }
        }
        if let Some(p) = v.iter().position(|&x| x != 0) {
            let s = inv(v[p]).expect("nonzero");
            v.iter_mut().for_each(|x| *x = mul(*x, s));
            // Keep the basis fully reduced in column p.
            for (_, b) in basis.iter_mut() {
                let f = b[p];
                if f != 0 {
                    for (x, y) in b.iter_mut().zip(&v) {
                        *x ^= mul(f, *y);
                    }
                }
            }
            basis.push((p, v));
            chosen.push(i);
        }
    }
    chosen
}

/// Coefficients c with sum_i c[i] * rows[i] = target, or `None` if target is not in the
/// span of rows. Free variables are set to zero, so unneeded rows get coefficient 0.
pub fn solve_combination(rows: &[&[u8]], target: &[u8]) -> Option<Vec<u8>> {
    let h = rows.len();
    let k = target.len();
    // Augmented system A c = target with A = rows^T (k x h).
    let mut a = Matrix::zeros(k, h + 1);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), k, "row length differs from target length");
        for (j, &v) in r.iter().enumerate() {
            a.set(j, i, v);
        }
    }
    for (j, &t) in target.iter().enumerate() {
        a.set(j, h, t);
    }
    let mut pivots = Vec::new();
    let mut row = 0;
    for col in 0..h {
        if row == k {
            break;
        }
        let Some(p) = (row..k).find(|&r| a.get(r, col) != 0) else {
            continue;
        };
        a.swap_rows(row, p);
        let s = inv(a.get(row, col)).expect("nonzero");
        a.scale_row(row, s);
        for r in 0..k {
            let f = a.get(r, col);
            if r != row && f != 0 {
                a.add_row_multiple(r, row, f);
            }
        }
        pivots.push(col);
        row += 1;
    }
    // Consistent iff no zero row has a nonzero right-hand side.
    if (row..k).any(|r| a.get(r, h) != 0) {
        return None;
    }
    let mut c = vec![0u8; h];
    for (r, &col) in pivots.iter().enumerate() {
        c[col] = a.get(r, h);
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invert_round_trip() {
        let m = Matrix::from_rows(&[&[1, 2, 3], &[4, 5, 6], &[7, 8, 10]]);
        let i = m.invert().expect("invertible");
        assert_eq!(m.mul(&i), Matrix::identity(3));
        let singular = Matrix::from_rows(&[&[1, 2], &[1, 2]]);
        assert!(singular.invert().is_none());
    }

    #[test]
    fn solve_and_rank() {
        let rows: [&[u8]; 3] = [&[1, 0, 0], &[0, 1, 0], &[1, 1, 0]];
        assert_eq!(independent_rows(&rows), vec![0, 1]);
        let c = solve_combination(&rows, &[3, 5, 0]).unwrap();
        let got: Vec<u8> = (0..3).map(|j| (0..3).fold(0, |a, i| a ^ mul(c[i], rows[i][j]))).collect();
        assert_eq!(got, vec![3, 5, 0]);
        assert_eq!(c[2], 0, "free variable left at zero");
        assert!(solve_combination(&rows, &[0, 0, 1]).is_none());
    }
}
