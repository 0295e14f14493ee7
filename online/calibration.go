package online

import "math"

// The weight's calibration: the last step from p_clean to the
// Score.Weight the model writes when the context part has nothing to add
// (no dwell, no event type, or the context switched off). p_clean's
// log-odds are drawn towards the mixture's share of reliable events by a
// fixed factor:
//
//	logit(weight) = logit(π) + weightTemper · (logit(posterior) − logit(π))
//
// π is the weight of the mixture's reliable component (the share of
// distilled events it holds), ½ until the mixture's first fit. The
// posterior is over-dispersed: its log-odds spread further than its
// ranking supports, most of all early in a stream, where the classifier
// has learned which pairs are observed but not yet which are noise, and
// it put too many noisy events in its top bin (docs/design/model.md, "The
// weight to train on: calibration"). Once the context has evidence to
// add, the context's posterior is the weight: it draws p_clean's log-odds
// in itself (pCleanTemper, towards the mean p_clean) and adds the
// evidence, and a second draw would shrink p_clean twice (since stop 25;
// docs/design/model.md, "The context's first events"). The map is
// monotone at any one time, so it ranks the events of a period as the
// posterior does; it reads no
// truth and changes nothing the model learns: the context learns from the
// posterior, not from the weight.
const (
	// weightTemper is the factor on the posterior's log-odds about
	// logit(π). Chosen on seed 1 of the v2 200k stream among 0.6 … 0.9
	// by the expected calibration error of the weight.
	weightTemper = 0.8
	// reliableShareFloor keeps logit(π) finite.
	reliableShareFloor = 1e-3
)

// calibrate returns the weight for a posterior p of the event being
// genuine: p's log-odds drawn towards the mixture's reliable share.
func (m *Model) calibrate(p float64) float64 {
	share := m.reliableShare()
	if share == 0 {
		return p
	}
	return calibrateTo(p, share)
}

// calibrateTo is calibrate with share as π.
func calibrateTo(p, share float64) float64 { return temperTo(p, share, weightTemper) }

// temperTo draws p's log-odds towards logit(share) by the factor temper.
func temperTo(p, share, temper float64) float64 {
	p = min(max(p, pCleanFloor), 1-pCleanFloor)
	prior := math.Log(share / (1 - share))
	return sigmoid(prior + temper*(math.Log(p/(1-p))-prior))
}

// reliableShare is π, the weight of the mixture's reliable component,
// kept reliableShareFloor away from 0 and 1; 0 before the mixture's first
// fit.
func (m *Model) reliableShare() float64 {
	g := &m.mixture.gmm
	if !g.fitted {
		return 0
	}
	return min(max(g.weight[g.reliable], reliableShareFloor), 1-reliableShareFloor)
}
