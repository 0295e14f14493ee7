package cli

import (
	"errors"
	"strings"
	"testing"

	"denoiser/service"
)

// TestCheckSets: a --set without "=" and one of a whole section are
// configuration errors that say what to write (the configuration's own
// message for a section was "unknown setting "model" (did you mean
// model?)"); settings pass.
func TestCheckSets(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
		say  []string // "" for no error
	}{
		{"settings", []string{"model.dim=8", "seed=3", "fields.ts=timestamp"}, nil},
		{"no value", []string{"model.dim"}, []string{`--set "model.dim": want PATH=VALUE, e.g. --set model.dim=16`}},
		{"a section as a flow map", []string{"model={dim: 8, mode: rating}"},
			[]string{"--set model={dim: 8, mode: rating}: model is a section, not a setting: give one --set per setting, --set model.dim=8 --set model.mode=rating"}},
		{"a section with an unknown key", []string{"model={dimm: 8}"}, []string{"--set model.KEY=VALUE (the keys of model: ", "dim"}},
		{"a section as a scalar", []string{"fields=user_id"}, []string{"fields is a section", "the keys of fields: user, item, ts"}},
		{"every wrong one", []string{"model", "kafka=x"}, []string{`--set "model"`, "kafka is a section"}},
	} {
		err := CheckSets(tc.sets)
		if len(tc.say) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, service.ErrConfig) {
			t.Errorf("%s: %v, want a configuration error", tc.name, err)
			continue
		}
		for _, say := range tc.say {
			if !strings.Contains(err.Error(), say) {
				t.Errorf("%s: %v, want it to say %q", tc.name, err, say)
			}
		}
	}
}

// TestLoadReplayConfigUnknownEnv: a DENOISER_* variable that names no
// setting is refused with the variable it most likely means, where one is
// near (it said "DENOISER_MODEL_DIMM name no setting").
func TestLoadReplayConfigUnknownEnv(t *testing.T) {
	for _, tc := range []struct {
		environ []string
		say     string
	}{
		{[]string{"DENOISER_MODEL_DIMM=16"}, "DENOISER_MODEL_DIMM (did you mean DENOISER_MODEL_DIM?) names no setting"},
		{[]string{"DENOISER_MODLE_DIM=16"}, "did you mean DENOISER_MODEL_DIM?"},
		{[]string{"DENOISER_WHATEVER=1", "DENOISER_SEDE=2"}, "DENOISER_WHATEVER, DENOISER_SEDE (did you mean DENOISER_SEED?) name no setting; a setting a.b_c is DENOISER_A_B_C"},
	} {
		_, err := LoadReplayConfig("", tc.environ, nil)
		if !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%v: %v, want it to say %q", tc.environ, err, tc.say)
		}
	}
	if _, err := LoadReplayConfig("", []string{"DENOISER_MODEL_DIM=16"}, []string{"model.mode=binary"}); err != nil {
		t.Errorf("a known variable: %v", err)
	}
}

// TestLoadReplayConfigClasses: model.classes outside rating mode is
// refused by replay as by `denoiser run` (replay took classes 7 in binary
// mode and scored with 2); in rating mode it is read.
func TestLoadReplayConfigClasses(t *testing.T) {
	_, err := LoadReplayConfig("", nil, []string{"model.classes=7"})
	if !errors.Is(err, service.ErrConfig) || !strings.Contains(err.Error(), "model.classes: 7, but only rating mode reads it") {
		t.Errorf("classes 7 in binary mode: %v", err)
	}
	c, err := LoadReplayConfig("", nil, []string{"model.mode=rating", "model.classes=7"})
	if err != nil || c.Model.K() != 7 {
		t.Errorf("classes 7 in rating mode: K %d, %v", c.Model.K(), err)
	}
}
