package input

import "testing"

func TestPositionString(t *testing.T) {
	if s := (Position{File: "a.jsonl", Line: 3}).String(); s != "a.jsonl:3" {
		t.Error(s)
	}
	if s := (Position{Topic: "clicks", Partition: 2, Offset: 9}).String(); s != "clicks/2@9" {
		t.Error(s)
	}
}
