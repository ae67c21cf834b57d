package bench

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// headline is one group of bars in the chart: a speed relative to the
// floor's in one scenario, higher is better.
type headline struct {
	label    string
	scenario string
	speed    func(lib, floor *Result) float64
}

func headlines() []headline {
	rate := func(l, f *Result) float64 { return l.Rate() / f.Rate() }
	return []headline{
		{"uncontended\ncycles/s", Uncontended, rate},
		{"16 processes, 1 key\nacquisitions/s", Procs16, rate},
		{"64 processes, 1 key\nacquisitions/s", Procs64, rate},
		{"8 processes, 2 ms hold\nacquisitions/s", Procs8Hold, rate},
		{"64 processes, 64 keys\ncycles/s", Procs64Keys, rate},
	}
}

// WriteChart renders the headline ratios as a grouped bar chart in format
// "svg" (or "png", "pdf"): one group per headline, one bar per library other
// than the floor, whose speed is the dashed line at 1.
func (r *Report) WriteChart(w io.Writer, format string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Speed relative to the floor (SET NX PX + compare-and-delete), higher is better\nRedis %s, %d CPUs, %d×%v per library and scenario",
		r.RedisVersion, r.CPUs, r.Config.Rounds, r.Config.Duration)
	p.Y.Label.Text = "library ÷ floor"
	p.Legend.Top = true
	p.Legend.Left = true

	hs := headlines()
	var libs []Library
	for _, l := range r.Config.Libraries {
		if l.Name != FloorName {
			libs = append(libs, l)
		}
	}
	barWidth := vg.Points(18)
	ymax := 1.0
	for i, l := range libs {
		vals, labels := r.speeds(hs, l.Name)
		for _, v := range vals {
			ymax = max(ymax, v)
		}
		offset := barWidth * vg.Length(float64(i)-float64(len(libs)-1)/2)
		if err := addBars(p, l.Name, plotutil.Color(i), vals, labels, barWidth, offset); err != nil {
			return err
		}
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.Legend.Add("floor = 1", one)
	p.Y.Min, p.Y.Max = 0, ymax*1.15
	names := make([]string, len(hs))
	for j, h := range hs {
		names[j] = h.label
	}
	p.NominalX(names...)

	wt, err := p.WriterTo(10*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// speeds are lib's speeds in the headlines, and their labels above the
// bars; a speed that cannot be computed is a bar of 0 labelled "n/a".
func (r *Report) speeds(hs []headline, lib string) (plotter.Values, plotter.XYLabels) {
	vals := make(plotter.Values, len(hs))
	labels := plotter.XYLabels{XYs: make(plotter.XYs, len(hs)), Labels: make([]string, len(hs))}
	for j, h := range hs {
		lr, fr := r.Result(h.scenario, lib), r.Result(h.scenario, FloorName)
		v := math.NaN()
		if lr != nil && fr != nil {
			v = h.speed(lr, fr)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			vals[j], labels.Labels[j] = 0, "n/a"
		} else {
			vals[j], labels.Labels[j] = v, ratioString(v)
		}
		labels.XYs[j] = plotter.XY{X: float64(j), Y: vals[j]}
	}
	return vals, labels
}

// addBars adds one library's bars, shifted by offset within each group, and
// their labels to p.
func addBars(p *plot.Plot, name string, c color.Color, vals plotter.Values, labels plotter.XYLabels, width, offset vg.Length) error {
	bars, err := plotter.NewBarChart(vals, width)
	if err != nil {
		return err
	}
	bars.Offset = offset
	bars.Color = c
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.Legend.Add(name, bars)

	lab, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for k := range lab.TextStyle {
		lab.TextStyle[k].Font.Size = vg.Points(7)
		lab.TextStyle[k].XAlign = draw.XCenter
	}
	lab.Offset = vg.Point{X: offset, Y: vg.Points(2)}
	p.Add(lab)
	return nil
}
