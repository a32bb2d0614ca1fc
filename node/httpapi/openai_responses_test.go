package httpapi

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

func TestOpenAIResponses(t *testing.T) {
	_, eng, url := newTestServer(t)
	client := openAIClient(url)
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:        "stories260K",
		Instructions: openai.String("Tell stories."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Once?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage("Once.", responses.EasyInputMessageRoleAssistant),
			responses.ResponseInputItemParamOfMessage("Again.", responses.EasyInputMessageRoleDeveloper),
		}},
		Temperature: openai.Float(0.3),
		Store:       openai.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != fullReply || resp.Status != "completed" || resp.Object != "response" || !strings.HasPrefix(resp.ID, "resp_") {
		t.Errorf("response %s", resp.RawJSON())
	}
	if resp.Usage.OutputTokens != 10 || resp.Usage.InputTokens != int64(len(eng.lastRequest().Prompt)) || resp.Temperature != 0.3 {
		t.Errorf("usage %+v temperature %v", resp.Usage, resp.Temperature)
	}
	eng.mu.Lock()
	msgs := eng.renderedMsgs
	eng.mu.Unlock()
	roles := ""
	for _, m := range msgs {
		roles += m.Role + ":" + m.Content + " "
	}
	if roles != "system:Tell stories. user:Once? assistant:Once. system:Again. " {
		t.Errorf("rendered %q", roles)
	}

	// max_output_tokens cuts the reply: incomplete.
	resp, err = client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "stories260K", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, MaxOutputTokens: openai.Int(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" || resp.OutputText() != "Once upon" {
		t.Errorf("cut response %s", resp.RawJSON())
	}
}

func TestOpenAIResponsesStreamed(t *testing.T) {
	_, _, url := newTestServer(t)
	client := openAIClient(url)
	for _, limit := range []int64{0, 3} {
		params := responses.ResponseNewParams{Model: "stories260K", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
		want, final := fullReply, "response.completed"
		if limit > 0 {
			params.MaxOutputTokens = openai.Int(limit)
			want, final = "Once upon", "response.incomplete"
		}
		stream := client.Responses.NewStreaming(context.Background(), params)
		var types []string
		var deltas strings.Builder
		var done string
		var last responses.Response
		seq := int64(0)
		for stream.Next() {
			ev := stream.Current()
			if ev.SequenceNumber != seq {
				t.Errorf("event %q has sequence %d, want %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq++
			if len(types) == 0 || types[len(types)-1] != ev.Type {
				types = append(types, ev.Type)
			}
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.output_text.done":
				done = ev.Text
			case "response.completed", "response.incomplete":
				last = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		wantTypes := "response.created response.in_progress response.output_item.added response.content_part.added " +
			"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " + final
		if got := strings.Join(types, " "); got != wantTypes {
			t.Errorf("limit %d: events\n %s\nwant\n %s", limit, got, wantTypes)
		}
		if deltas.String() != want || done != want || last.OutputText() != want {
			t.Errorf("limit %d: deltas %q, done %q, final %q", limit, deltas.String(), done, last.OutputText())
		}
		if last.Usage.OutputTokens == 0 || last.Usage.TotalTokens != last.Usage.InputTokens+last.Usage.OutputTokens {
			t.Errorf("limit %d: usage %+v", limit, last.Usage)
		}
	}
}
