//! The text detector's boxes from its probability map: the DB ("differentiable binarisation")
//! post-processing of rapidocr 3.10.0, step for step as `models/image/ocr.md` ("4. DB
//! post-processing") describes it and `ocr_spec.py` runs it.
//!
//! Threshold at 0.3, a 2 x 2 dilation, the 8-connected regions (OpenCV's contours, of which
//! only the convex hull matters next), each region's minimum-area rectangle, its mean
//! probability over the rectangle as OpenCV fills it (kept at 0.5 and above), the rectangle
//! grown by Clipper 1's round offset (`area * 1.6 / perimeter`), its rectangle again, scaled to
//! the image, ordered and sorted into reading order.
//!
//! Written here: the pieces are small, and the crates that offer them compute other numbers
//! (`clipper2` places round joins differently; `imageproc`'s polygon fill marks other edge
//! pixels and its minimum-area rectangle has integer corners). Only the rectangle is not
//! OpenCV's to the bit (float64 calipers instead of OpenCV's float32 ones): a box corner then
//! differs by one pixel now and then (9 of 616 boxes of the reference set), never a string.
//!
//! Bounds: at most [`CANDIDATES_MAX`] regions are looked at (the reference's cut).

/// A point in pixels, x then y.
pub type Point = [f32; 2];
/// Four corners: top-left, top-right, bottom-right, bottom-left.
pub type Quad = [Point; 4];

/// Probability above which a pixel is text.
const THRESHOLD: f32 = 0.3;
/// Mean probability of a box below which it is dropped.
const BOX_THRESHOLD: f64 = 0.5;
/// Regions looked at, at most (the reference's `max_candidates`).
pub const CANDIDATES_MAX: usize = 1000;
/// How much a box grows: its area times this over its perimeter, on every side.
const UNCLIP_RATIO: f64 = 1.6;
/// Boxes whose short side is below this (before growing; `+ 2` after) are dropped.
const SIDE_MIN: f64 = 3.0;
/// A box whose top edge moves down by this much starts a new line in the reading order.
const LINE_STEP_PX: f32 = 10.0;

/// The boxes of the probability map `map` (`width` x `height`), in the coordinates of an
/// image of `image_width` x `image_height`, in reading order.
pub fn text_boxes(
    map: &[f32],
    width: usize,
    height: usize,
    image_width: usize,
    image_height: usize,
) -> Vec<Quad> {
    assert_eq!(map.len(), width * height);
    let text: Vec<bool> = map.iter().map(|&p| p > THRESHOLD).collect();
    let mask = dilate(&text, width, height);
    let mut boxes = Vec::new();
    for hull in region_hulls(&mask, width, height, CANDIDATES_MAX) {
        let Some((corners, short)) = min_area_rect(&hull) else {
            continue;
        };
        if short < SIDE_MIN {
            continue;
        }
        let quad = corner_order(corners);
        if BOX_THRESHOLD > mean_within(map, width, height, &quad) {
            continue;
        }
        let grown = offset_round(&quad, unclip_distance(&quad));
        if grown.is_empty() {
            continue;
        }
        let grown: Vec<[f64; 2]> = grown.iter().map(|&[x, y]| [x as f64, y as f64]).collect();
        let Some((corners, short)) = min_area_rect(&convex_hull(grown)) else {
            continue;
        };
        if short < SIDE_MIN + 2.0 {
            continue;
        }
        let scale = |v: f32, from: usize, to: usize| {
            (v / from as f32 * to as f32)
                .round_ties_even()
                .clamp(0.0, to as f32)
                .trunc()
        };
        let quad = corner_order(corners)
            .map(|[x, y]| [scale(x, width, image_width), scale(y, height, image_height)]);
        if let Some(quad) = clockwise_within(quad, image_width, image_height) {
            boxes.push(quad);
        }
    }
    reading_order(boxes)
}

/// `cv2.dilate` with a 2 x 2 kernel anchored at (1, 1): a pixel is set when it or its left,
/// upper or upper-left neighbour is.
fn dilate(mask: &[bool], width: usize, height: usize) -> Vec<bool> {
    let mut out = mask.to_vec();
    for y in 0..height {
        for x in 0..width {
            let at = y * width + x;
            let up = y > 0 && mask[at - width];
            let left = x > 0 && mask[at - 1];
            let diagonal = x > 0 && y > 0 && mask[at - width - 1];
            out[at] = mask[at] || up || left || diagonal;
        }
    }
    out
}

/// The convex hulls of the mask's 8-connected regions, at most `max` of them, in the order
/// OpenCV's `findContours(RETR_LIST)` lists their outer borders (the reverse of the raster
/// order of their first pixels). A region's hull is the hull of its border, so the leftmost
/// and rightmost pixel of each row stand for the region.
fn region_hulls(mask: &[bool], width: usize, height: usize, max: usize) -> Vec<Vec<[f64; 2]>> {
    let mut seen = vec![false; mask.len()];
    let mut hulls = Vec::new();
    let mut stack = Vec::new();
    for start in 0..mask.len() {
        if !mask[start] || seen[start] {
            continue;
        }
        let top = start / width;
        // Per row from the top: the leftmost and rightmost column.
        let mut extents: Vec<(usize, usize)> = Vec::new();
        seen[start] = true;
        stack.push(start);
        while let Some(at) = stack.pop() {
            let (x, y) = (at % width, at / width);
            let row = y - top;
            if extents.len() <= row {
                extents.resize(row + 1, (usize::MAX, 0));
            }
            let extent = &mut extents[row];
            extent.0 = extent.0.min(x);
            extent.1 = extent.1.max(x);
            for ny in y.saturating_sub(1)..=(y + 1).min(height - 1) {
                for nx in x.saturating_sub(1)..=(x + 1).min(width - 1) {
                    let next = ny * width + nx;
                    if mask[next] && !seen[next] {
                        seen[next] = true;
                        stack.push(next);
                    }
                }
            }
        }
        let mut points = Vec::with_capacity(extents.len() * 2);
        for (row, &(left, right)) in extents.iter().enumerate() {
            let y = (top + row) as f64;
            points.push([left as f64, y]);
            if right != left {
                points.push([right as f64, y]);
            }
        }
        hulls.push(convex_hull(points));
    }
    hulls.reverse();
    hulls.truncate(max);
    hulls
}

fn cross(o: [f64; 2], a: [f64; 2], b: [f64; 2]) -> f64 {
    (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
}

/// Andrew's monotone chain over the distinct points, collinear points dropped,
/// counter-clockwise in image coordinates from the smallest (x, y).
fn convex_hull(mut points: Vec<[f64; 2]>) -> Vec<[f64; 2]> {
    points.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
    points.dedup();
    if points.len() < 3 {
        return points;
    }
    let mut lower: Vec<[f64; 2]> = Vec::new();
    for &p in &points {
        while lower.len() >= 2 && cross(lower[lower.len() - 2], lower[lower.len() - 1], p) <= 0.0 {
            lower.pop();
        }
        lower.push(p);
    }
    let mut upper: Vec<[f64; 2]> = Vec::new();
    for &p in points.iter().rev() {
        while upper.len() >= 2 && cross(upper[upper.len() - 2], upper[upper.len() - 1], p) <= 0.0 {
            upper.pop();
        }
        upper.push(p);
    }
    lower.pop();
    upper.pop();
    lower.extend(upper);
    lower
}

/// The minimum-area rectangle around a convex hull (one candidate per hull edge, the first
/// smallest wins): its corners (f32, as `cv2.boxPoints` gives them) and its shorter side.
/// `None` for no points.
fn min_area_rect(hull: &[[f64; 2]]) -> Option<([Point; 4], f64)> {
    let to_f32 = |p: [f64; 2]| [p[0] as f32, p[1] as f32];
    match hull.len() {
        0 => return None,
        1 => return Some(([to_f32(hull[0]); 4], 0.0)),
        2 => {
            let (a, b) = (to_f32(hull[0]), to_f32(hull[1]));
            return Some(([a, b, b, a], 0.0));
        }
        _ => {}
    }
    /// A rectangle: its area, its axes, and the hull's extent along them.
    struct Candidate {
        area: f64,
        u: [f64; 2],
        v: [f64; 2],
        extent: [f64; 4],
    }
    let mut best: Option<Candidate> = None;
    for i in 0..hull.len() {
        let (a, b) = (hull[i], hull[(i + 1) % hull.len()]);
        let length = (b[0] - a[0]).hypot(b[1] - a[1]);
        let u = [(b[0] - a[0]) / length, (b[1] - a[1]) / length];
        let v = [-u[1], u[0]];
        let (mut u0, mut u1, mut v0, mut v1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for p in hull {
            let pu = p[0] * u[0] + p[1] * u[1];
            let pv = p[0] * v[0] + p[1] * v[1];
            u0 = u0.min(pu);
            u1 = u1.max(pu);
            v0 = v0.min(pv);
            v1 = v1.max(pv);
        }
        let area = (u1 - u0) * (v1 - v0);
        if best.as_ref().is_none_or(|smallest| area < smallest.area) {
            best = Some(Candidate {
                area,
                u,
                v,
                extent: [u0, u1, v0, v1],
            });
        }
    }
    let Candidate {
        u,
        v,
        extent: [u0, u1, v0, v1],
        ..
    } = best?;
    let corner = |a: f64, b: f64| [a * u[0] + b * v[0], a * u[1] + b * v[1]];
    let corners = [
        corner(u0, v0),
        corner(u1, v0),
        corner(u1, v1),
        corner(u0, v1),
    ];
    Some((corners.map(to_f32), (u1 - u0).min(v1 - v0)))
}

/// The reference's `get_mini_boxes` order: corners sorted by x (stably); of the two left
/// ones, the second is the bottom-left only if it lies lower; the same for the right ones.
fn corner_order(corners: [Point; 4]) -> Quad {
    let mut p = corners;
    p.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let (tl, bl) = if p[1][1] > p[0][1] { (0, 1) } else { (1, 0) };
    let (tr, br) = if p[3][1] > p[2][1] { (2, 3) } else { (3, 2) };
    [p[tl], p[tr], p[br], p[bl]]
}

/// The reference's `box_score_fast`: the mean of `map` over the quadrilateral as OpenCV fills
/// it, inside the quadrilateral's bounding rectangle clipped to the map.
fn mean_within(map: &[f32], width: usize, height: usize, quad: &Quad) -> f64 {
    let bound = |values: [f32; 4], side: usize, low: bool| {
        let v = if low {
            values.into_iter().fold(f32::MAX, f32::min).floor()
        } else {
            values.into_iter().fold(f32::MIN, f32::max).ceil()
        };
        v.clamp(0.0, (side - 1) as f32) as usize
    };
    let xs = quad.map(|p| p[0]);
    let ys = quad.map(|p| p[1]);
    let (x0, x1) = (bound(xs, width, true), bound(xs, width, false));
    let (y0, y1) = (bound(ys, height, true), bound(ys, height, false));
    let (w, h) = (x1 - x0 + 1, y1 - y0 + 1);
    let mut mask = vec![false; w * h];
    let corners: Vec<[i64; 2]> = quad
        .iter()
        .map(|p| [(p[0] - x0 as f32) as i64, (p[1] - y0 as f32) as i64])
        .collect();
    super::fill::fill_polygon(&mut mask, w, h, &corners);
    let (mut sum, mut count) = (0.0f64, 0usize);
    for y in 0..h {
        for x in 0..w {
            if mask[y * w + x] {
                sum += f64::from(map[(y0 + y) * width + x0 + x]);
                count += 1;
            }
        }
    }
    if count == 0 {
        0.0
    } else {
        sum / count as f64
    }
}

/// How far the reference grows a box: its area times [`UNCLIP_RATIO`] over its perimeter,
/// both as GEOS computes them (shoelace with x taken from the first vertex).
fn unclip_distance(quad: &Quad) -> f64 {
    let p: Vec<[f64; 2]> = quad
        .iter()
        .chain([&quad[0]])
        .map(|&[x, y]| [f64::from(x), f64::from(y)])
        .collect();
    let x0 = p[0][0];
    let mut twice_area = 0.0;
    for i in 1..p.len() - 1 {
        twice_area += (p[i][0] - x0) * (p[i - 1][1] - p[i + 1][1]);
    }
    let area = (twice_area / 2.0).abs();
    let mut length = 0.0;
    for i in 0..p.len() - 1 {
        let (dx, dy) = (p[i + 1][0] - p[i][0], p[i + 1][1] - p[i][1]);
        length += (dx * dx + dy * dy).sqrt();
    }
    if length == 0.0 {
        return 0.0;
    }
    area * UNCLIP_RATIO / length
}

/// Half away from zero, as Clipper rounds.
fn round_half_away(v: f64) -> i64 {
    if v < 0.0 {
        (v - 0.5) as i64
    } else {
        (v + 0.5) as i64
    }
}

/// Clipper 6.4.2's `ClipperOffset` of a closed polygon with round joins (`JT_ROUND`,
/// `ET_CLOSEDPOLYGON`, arc tolerance 0.25) by `delta` > 0, corners truncated to integers first
/// as pyclipper does. The points of the grown outline (Clipper's final union changes only
/// their order and drops collinear ones, which no rectangle taken next can see).
fn offset_round(quad: &Quad, delta: f64) -> Vec<[i64; 2]> {
    if delta.is_nan() || delta <= 0.0 {
        return Vec::new();
    }
    let points: Vec<[i64; 2]> = quad.iter().map(|p| [p[0] as i64, p[1] as i64]).collect();
    let mut last = points.len() - 1;
    while last > 0 && points[0] == points[last] {
        last -= 1;
    }
    let mut path = vec![points[0]];
    for &q in &points[1..=last] {
        if path.last() != Some(&q) {
            path.push(q);
        }
    }
    if path.len() < 3 {
        return Vec::new();
    }
    let n = path.len();
    let twice_area: i64 = (0..n)
        .map(|i| {
            let (a, b) = (path[(i + n - 1) % n], path[i]);
            a[0] * b[1] - b[0] * a[1]
        })
        .sum();
    if twice_area < 0 {
        path.reverse();
    }
    let tolerance = if 0.25 > delta * 0.25 {
        delta * 0.25
    } else {
        0.25
    };
    let mut steps = std::f64::consts::PI / (1.0 - tolerance / delta).acos();
    if steps > delta * std::f64::consts::PI {
        steps = delta * std::f64::consts::PI;
    }
    let turn = 2.0 * std::f64::consts::PI / steps;
    let (sin, cos) = (turn.sin(), turn.cos());
    let steps_per_rad = steps / (2.0 * std::f64::consts::PI);
    let normals: Vec<[f64; 2]> = (0..n)
        .map(|j| {
            let (a, b) = (path[j], path[(j + 1) % n]);
            if a == b {
                return [0.0, 0.0];
            }
            let (dx, dy) = ((b[0] - a[0]) as f64, (b[1] - a[1]) as f64);
            let f = 1.0 / (dx * dx + dy * dy).sqrt();
            [dy * f, -(dx * f)]
        })
        .collect();
    let mut out = Vec::new();
    let at = |p: [i64; 2], normal: [f64; 2]| {
        [
            round_half_away(p[0] as f64 + normal[0] * delta),
            round_half_away(p[1] as f64 + normal[1] * delta),
        ]
    };
    let mut k = n - 1;
    for j in 0..n {
        let p = path[j];
        let (nk, nj) = (normals[k], normals[j]);
        let mut sin_a = nk[0] * nj[1] - nj[0] * nk[1];
        if (sin_a * delta).abs() < 1.0 {
            let cos_a = nk[0] * nj[0] + nj[1] * nk[1];
            if cos_a > 0.0 {
                out.push(at(p, nk));
                k = j;
                continue;
            }
        } else {
            sin_a = sin_a.clamp(-1.0, 1.0);
        }
        if sin_a * delta < 0.0 {
            out.push(at(p, nk));
            out.push(p);
            out.push(at(p, nj));
        } else {
            let angle = sin_a.atan2(nk[0] * nj[0] + nk[1] * nj[1]);
            let count = round_half_away(steps_per_rad * angle.abs()).max(1);
            let [mut x, mut y] = nk;
            for _ in 0..count {
                out.push(at(p, [x, y]));
                (x, y) = (x * cos - sin * y, x * sin + y * cos);
            }
            out.push(at(p, nj));
        }
        k = j;
    }
    out
}

/// The reference's `filter_det_res`: corners reordered (the two leftmost are the left pair,
/// each pair by y), clipped into the image and truncated; `None` when a side is 3 px or less.
fn clockwise_within(quad: Quad, width: usize, height: usize) -> Option<Quad> {
    let mut by_x = quad;
    by_x.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut left = [by_x[0], by_x[1]];
    let mut right = [by_x[2], by_x[3]];
    left.sort_by(|a, b| a[1].total_cmp(&b[1]));
    right.sort_by(|a, b| a[1].total_cmp(&b[1]));
    let clip = |[x, y]: Point| {
        [
            x.clamp(0.0, (width.max(1) - 1) as f32).trunc(),
            y.clamp(0.0, (height.max(1) - 1) as f32).trunc(),
        ]
    };
    let out = [left[0], right[0], right[1], left[1]].map(clip);
    let side = |a: Point, b: Point| {
        let (dx, dy) = (a[0] - b[0], a[1] - b[1]);
        (dx * dx + dy * dy).sqrt() as i64
    };
    (side(out[0], out[1]) > 3 && side(out[0], out[3]) > 3).then_some(out)
}

/// Reading order: by the top-left corner's y (stably); a new line where it grows by at least
/// [`LINE_STEP_PX`] from the previous box; each line by x (stably).
fn reading_order(mut boxes: Vec<Quad>) -> Vec<Quad> {
    boxes.sort_by(|a, b| a[0][1].total_cmp(&b[0][1]));
    let mut line = 0usize;
    let mut keyed: Vec<(usize, Quad)> = Vec::with_capacity(boxes.len());
    for (i, quad) in boxes.iter().enumerate() {
        if i > 0 && quad[0][1] - boxes[i - 1][0][1] >= LINE_STEP_PX {
            line += 1;
        }
        keyed.push((line, *quad));
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1[0][0].total_cmp(&b.1[0][0])));
    keyed.into_iter().map(|(_, quad)| quad).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dilation_spreads_right_and_down() {
        let mask = [false, false, false, false, true, false, false, false, false];
        let out = dilate(&mask, 3, 3);
        let set: Vec<usize> = (0..9).filter(|&i| out[i]).collect();
        assert_eq!(set, vec![4, 5, 7, 8]);
    }

    #[test]
    fn regions_come_in_opencv_order_with_their_hulls() {
        // The cases of OpenCV 4.11's findContours(RETR_LIST) checked by hand in ocr.md's
        // spirit: the last region in raster order comes first; border pixels count.
        let mut mask = vec![false; 6 * 8];
        for y in 0..3 {
            for x in 0..4 {
                mask[y * 8 + x] = true;
            }
        }
        mask[4 * 8 + 7] = true;
        mask[5 * 8 + 6] = true;
        let hulls = region_hulls(&mask, 8, 6, 10);
        assert_eq!(hulls.len(), 2);
        assert_eq!(hulls[0], vec![[6.0, 5.0], [7.0, 4.0]]);
        assert_eq!(
            hulls[1],
            vec![[0.0, 0.0], [3.0, 0.0], [3.0, 2.0], [0.0, 2.0]]
        );
        assert_eq!(region_hulls(&mask, 8, 6, 1).len(), 1);
    }

    #[test]
    fn an_axis_aligned_block_gives_its_own_rectangle() {
        let hull = convex_hull(vec![
            [2.0, 3.0],
            [10.0, 3.0],
            [10.0, 7.0],
            [2.0, 7.0],
            [5.0, 5.0],
        ]);
        let (corners, short) = min_area_rect(&hull).unwrap();
        assert_eq!(short, 4.0);
        let quad = corner_order(corners);
        assert_eq!(quad, [[2.0, 3.0], [10.0, 3.0], [10.0, 7.0], [2.0, 7.0]]);
    }

    #[test]
    fn unclip_grows_a_rectangle_by_its_area_over_its_perimeter() {
        // pyclipper 1.4.0 on this box, distance 100 * 20 * 1.6 / 240 = 13.33: the grown
        // outline's rectangle is 126 x 46 around the same centre (read from ocr_spec.py).
        let quad = [[0.0, 0.0], [100.0, 0.0], [100.0, 20.0], [0.0, 20.0]];
        let d = unclip_distance(&quad);
        assert!((d - 13.333333333333334).abs() < 1e-12);
        let grown: Vec<[f64; 2]> = offset_round(&quad, d)
            .iter()
            .map(|&[x, y]| [x as f64, y as f64])
            .collect();
        let (corners, short) = min_area_rect(&convex_hull(grown)).unwrap();
        assert_eq!(short, 46.0);
        assert_eq!(
            corner_order(corners),
            [[-13.0, -13.0], [113.0, -13.0], [113.0, 33.0], [-13.0, 33.0]]
        );
    }

    #[test]
    fn a_map_with_one_line_gives_one_box_in_image_coordinates() {
        let (w, h) = (64, 32);
        let mut map = vec![0.0f32; w * h];
        for y in 10..18 {
            for x in 8..50 {
                map[y * w + x] = 0.9;
            }
        }
        let boxes = text_boxes(&map, w, h, 128, 64);
        assert_eq!(boxes.len(), 1);
        let [tl, tr, br, bl] = boxes[0];
        assert!(
            tl[0] < 16.0 && tr[0] > 98.0 && tl[1] < 20.0 && bl[1] > 36.0,
            "{boxes:?}"
        );
        assert_eq!((tl[1], tr[1], br[0], bl[0]), (tr[1], tl[1], tr[0], tl[0]));
        // Faint ink (below the box threshold) is no text.
        let faint: Vec<f32> = map
            .iter()
            .map(|&p| if p > 0.0 { 0.4 } else { 0.0 })
            .collect();
        assert!(text_boxes(&faint, w, h, 128, 64).is_empty());
    }

    #[test]
    fn reading_order_is_by_line_then_left_to_right() {
        let at = |x: f32, y: f32| [[x, y], [x + 5.0, y], [x + 5.0, y + 5.0], [x, y + 5.0]];
        let boxes = vec![at(50.0, 32.0), at(10.0, 40.0), at(90.0, 0.0), at(0.0, 5.0)];
        let ordered = reading_order(boxes);
        let firsts: Vec<Point> = ordered.iter().map(|q| q[0]).collect();
        // 0 and 5 are one line (5 px apart), 32 and 40 another (8 px apart).
        assert_eq!(
            firsts,
            vec![[0.0, 5.0], [90.0, 0.0], [10.0, 40.0], [50.0, 32.0]]
        );
    }

    proptest! {
        #[test]
        fn any_map_gives_boxes_inside_the_image(
            values in proptest::collection::vec(0.0f32..1.0, 24 * 16),
            iw in 1usize..300, ih in 1usize..300,
        ) {
            for quad in text_boxes(&values, 24, 16, iw, ih) {
                for [x, y] in quad {
                    prop_assert!(x >= 0.0 && y >= 0.0 && x <= (iw - 1) as f32 && y <= (ih - 1) as f32);
                }
            }
        }

        #[test]
        fn the_offset_contains_the_box(
            x in 0.0f32..500.0, y in 0.0f32..500.0, w in 1.0f32..300.0, h in 1.0f32..60.0
        ) {
            let quad = [[x, y], [x + w, y], [x + w, y + h], [x, y + h]];
            let d = unclip_distance(&quad);
            let grown = offset_round(&quad, d);
            if !grown.is_empty() {
                let (min_x, max_x) = grown.iter().fold((i64::MAX, i64::MIN), |a, p| (a.0.min(p[0]), a.1.max(p[0])));
                prop_assert!(min_x as f32 <= x.trunc() && max_x as f32 >= (x + w).trunc());
            }
        }
    }
}
